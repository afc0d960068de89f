"""Named protocols (``lightning_prd.protocols``): the table, the weights-file check, what a protocol sets on
``GenerativeMetrics``, the fingerprint; and the feature-side support: several-output extractors in
``extract_features``, ``load_into``'s key-naming errors, ``file_sha256`` and the hub-cache names."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

import numpy as np
import pytest
import torch
from torch import nn

from lightning_prd import GenerativeMetrics, __version__
from lightning_prd.features import Identity, RandomConvNet, extract_features, register_extractor
from lightning_prd.features import registry as registry_module
from lightning_prd.features.base import FeatureExtractor, describe_extractor
from lightning_prd.features.images import (
    TORCH_FIDELITY_INCEPTION,
    file_sha256,
    load_into,
    resolve_weights,
    state_dict_mismatch,
)
from lightning_prd.functional.engine.vocabulary import Default
from lightning_prd.protocols import (
    FINGERPRINT_KEYS,
    available_protocols,
    check_against_protocol,
    check_weights_file,
    find_weights,
    fingerprint,
    fingerprint_differences,
    get_protocol,
    metric_arguments,
    register_protocol,
    resolve_arguments,
)

import oracle


# ---------------------------------------------------------------------------- fixtures
class StandIn(FeatureExtractor):
    """A tiny network with the attributes of the package's extractors; records what it was built with."""

    num_features = 4

    def __init__(self, weights=None, **options):
        super().__init__()
        self.weights, self.options = weights, options
        self.name = "stand-in"
        self.preprocessing = {"resize": options.get("resize", "tf1"), "quantisation": "floor", "input_size": [8, 8]}
        self.proj = nn.Linear(3, 4)

    def forward(self, x):
        return self.proj(x.float().mean((2, 3)))


@pytest.fixture
def stand_in_vgg():
    """The registry's ``vgg16-nvlabs`` replaced by :class:`StandIn` (restored afterwards)."""
    before = registry_module._REGISTRY.get("vgg16-nvlabs")
    register_extractor("vgg16-nvlabs", StandIn, overwrite=True)
    yield
    if before is None:
        registry_module._REGISTRY.pop("vgg16-nvlabs", None)
    else:
        register_extractor("vgg16-nvlabs", before, overwrite=True)


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """torch's hub directory moved to a temporary folder; returns its ``checkpoints`` folder."""
    old = torch.hub.get_dir()
    torch.hub.set_dir(str(tmp_path / "hub"))
    folder = tmp_path / "hub" / "checkpoints"
    folder.mkdir(parents=True)
    yield folder
    torch.hub.set_dir(old)


# ---------------------------------------------------------------------------- the table
def test_the_table_holds_the_protocols_the_issue_names():
    assert {"fid", "pytorch-fid", "clean-fid", "pr50k3", "fd-dinov2", "cmmd", "prdc"} <= set(available_protocols())


@pytest.mark.parametrize(
    "name, extractor, k, ball, num_real, num_fake",
    [
        # NVlabs metric_main.py: pr50k3 = compute_pr(max_real=50000, num_gen=50000, nhood_size=3), `<=`
        ("pr50k3", "vgg16-nvlabs", 3, "closed", 50_000, 50_000),
        # prdc README: nearest_k = 5, 10,000 / 10,000, strict `<`
        ("prdc", None, 5, "open", 10_000, 10_000),
        # guided-diffusion evaluator: ManifoldEstimator(nhood_sizes=(3,)) with `<=`; fid50k_full: all real, 50k
        ("fid", "fid-inception", 3, "closed", None, 50_000),
        ("fd-dinov2", "dinov2", None, None, None, 50_000),
    ],
)
def test_protocol_rows(name, extractor, k, ball, num_real, num_fake):
    p = get_protocol(name)
    assert (p.extractor, p.k_precision_recall, p.ball, p.num_real, p.num_fake) == (
        extractor,
        k,
        ball,
        num_real,
        num_fake,
    )
    assert p.matches and json.dumps(p.describe())


def test_resize_modes_of_the_fid_protocols():
    modes = {name: get_protocol(name).extractor_options["resize"] for name in ("fid", "pytorch-fid", "clean-fid")}
    assert modes == {"fid": "tf1", "pytorch-fid": "pytorch-fid", "clean-fid": "clean"}
    assert "inception-2015-12-05.pt" in get_protocol("clean-fid").weights_files
    assert TORCH_FIDELITY_INCEPTION in get_protocol("fid").weights_files


def test_unknown_protocol_lists_the_names():
    with pytest.raises(ValueError, match="pr50k3") as err:
        get_protocol("fid50k")
    assert "'fid50k'" in str(err.value)
    assert get_protocol(" PR50K3 ").name == "pr50k3"
    with pytest.raises(TypeError, match="protocol"):
        get_protocol(3)


def test_register_protocol_refuses_a_taken_name():
    with pytest.raises(ValueError, match="already registered"):
        register_protocol(get_protocol("fid"))
    with pytest.raises(TypeError, match="Protocol"):
        register_protocol("fid")


# ---------------------------------------------------------------------------- weights files
def test_a_file_of_another_name_is_refused_with_what_to_get(tmp_path):
    path = tmp_path / "inception_v3_google-0cc3c7bd.pth"
    path.write_bytes(b"torchvision's ImageNet weights")
    with pytest.raises(ValueError) as err:
        check_weights_file(get_protocol("fid"), path)
    text = str(err.value)
    for needed in ("pt_inception-2015-12-05-6726825d.pth", "6726825d", "inception_v3_google-0cc3c7bd.pth", "https://"):
        assert needed in text
    assert hashlib.sha256(path.read_bytes()).hexdigest()[:12] in text


def test_the_right_name_with_the_wrong_content_is_refused(tmp_path):
    # torch.hub's check_hash convention: the name's suffix is the SHA-256 prefix
    path = tmp_path / "pt_inception-2015-12-05-6726825d.pth"
    path.write_bytes(b"a truncated download")
    with pytest.raises(ValueError, match="damaged"):
        check_weights_file(get_protocol("fid"), path)


def test_a_file_is_accepted_by_its_sha256_whatever_its_name(tmp_path):
    path = tmp_path / "renamed.pth"
    path.write_bytes(b"the weights")
    digest = hashlib.sha256(b"the weights").hexdigest()
    for known in (digest, digest[:8]):
        p = dataclasses.replace(get_protocol("fid"), weights_sha256=(known,))
        assert check_weights_file(p, path) == path


def test_a_published_full_digest_refuses_other_content_under_the_right_name(tmp_path):
    path = tmp_path / "vgg16.pt"
    path.write_bytes(b"other content")
    published = hashlib.sha256(b"the published file").hexdigest()
    p = dataclasses.replace(get_protocol("pr50k3"), weights_sha256=(published,))
    with pytest.raises(ValueError, match=f"vgg16.pt.*{published[:12]}"):
        check_weights_file(p, path)
    path.write_bytes(b"the published file")
    assert check_weights_file(p, path) == path


def test_a_name_without_a_published_hash_is_accepted_by_name(tmp_path):
    path = tmp_path / "vgg16.pt"
    path.write_bytes(b"anything")
    assert check_weights_file(get_protocol("pr50k3"), path) == path
    with pytest.raises(FileNotFoundError, match="vgg16.pt"):
        check_weights_file(get_protocol("pr50k3"), tmp_path / "missing.pt")
    with pytest.raises(TypeError, match="weights"):
        check_weights_file(get_protocol("pr50k3"), {"state": "dict"})


def test_the_hub_lookup_checks_every_candidate(hub):
    p = get_protocol("fid")
    with pytest.raises(FileNotFoundError, match="never downloads"):
        find_weights(p)
    (hub / "pt_inception-2015-12-05-6726825d.pth").write_bytes(b"damaged")
    with pytest.raises(FileNotFoundError, match="refused"):
        find_weights(p)
    # torch-fidelity's (and torchmetrics') cache name, with content of the known SHA-256
    good = hub / TORCH_FIDELITY_INCEPTION
    good.write_bytes(b"good")
    known = dataclasses.replace(p, weights_sha256=(hashlib.sha256(b"good").hexdigest()[:8],))
    assert find_weights(known) == good


def test_build_extractor_passes_the_checked_file_and_options(tmp_path, stand_in_vgg, hub):
    p = get_protocol("pr50k3")
    path = tmp_path / "vgg16.pt"
    path.write_bytes(b"nvlabs")
    net = p.build_extractor(path)
    assert isinstance(net, StandIn) and net.weights == path
    assert net.weights_sha256 == hashlib.sha256(b"nvlabs").hexdigest()  # filled in for the fingerprint
    (tmp_path / "other.pt").write_bytes(b"x")
    with pytest.raises(ValueError, match="vgg16.pt"):
        p.build_extractor(tmp_path / "other.pt")
    with pytest.raises(FileNotFoundError, match="vgg16.pt"):
        p.build_extractor()  # nothing in the (empty) hub cache
    (hub / "vgg16.pt").write_bytes(b"nvlabs")
    assert p.build_extractor().weights == hub / "vgg16.pt"
    rnd = p.build_extractor(random_init=True)
    assert rnd.weights is None and rnd.options == {"random_init": True}


def test_a_torchscript_file_is_taken_from_the_cache_by_its_published_sha256_only(tmp_path, stand_in_vgg, hub):
    # vgg16.pt is code (torch.jit.load runs it): found by name in the hub cache it needs a published SHA-256
    script = tmp_path / "script.pt"
    torch.jit.save(torch.jit.script(torch.nn.Identity()), str(script))
    (hub / "vgg16.pt").write_bytes(script.read_bytes())
    digest = hashlib.sha256(script.read_bytes()).hexdigest()
    p = get_protocol("pr50k3")
    with pytest.raises(FileNotFoundError) as info:
        p.build_extractor()
    text = str(info.value)
    assert "TorchScript" in text and str(hub / "vgg16.pt") in text and digest[:12] in text and "\n" not in text
    published = dataclasses.replace(p, weights_sha256=(digest,))
    assert published.build_extractor().weights == hub / "vgg16.pt"
    assert p.build_extractor(hub / "vgg16.pt").weights == hub / "vgg16.pt"  # an explicit path is taken as given
    # clean-fid's NVlabs TorchScript inception-2015-12-05.pt: the same rule (the published digest is the state dict's)
    (hub / "inception-2015-12-05.pt").write_bytes(script.read_bytes())
    with pytest.raises(FileNotFoundError, match="inception-2015-12-05.pt: it is a TorchScript archive"):
        find_weights(get_protocol("clean-fid"))


def test_a_weights_path_that_is_no_file_says_what_it_is(hub, paths_that_are_no_file):
    p = get_protocol("fid")
    for path, error, what in paths_that_are_no_file:
        with pytest.raises(error) as info:
            check_weights_file(p, path)
        text = str(info.value)
        assert f"{str(path)!r} {what}" in text and "pt_inception-2015-12-05-6726825d.pth" in text, text
    (hub / "pt_inception-2015-12-05-6726825d.pth").mkdir()
    with pytest.raises(FileNotFoundError, match="refused: .*pt_inception-2015-12-05-6726825d.pth is a directory"):
        find_weights(p)


def test_build_extractor_refuses_options_against_the_protocol(tmp_path):
    with pytest.raises(ValueError) as err:
        get_protocol("fid").build_extractor(resize="clean", random_init=True)
    text = str(err.value)
    assert "`resize`" in text and "'fid'" in text and "'tf1'" in text and "'clean'" in text


def test_a_protocol_without_a_network_uses_the_features_as_given(tmp_path):
    p = get_protocol("prdc")
    assert isinstance(p.build_extractor(), Identity)
    with pytest.raises(ValueError, match="as given"):
        p.build_extractor(tmp_path / "w.pth")


# ---------------------------------------------------------------------------- what a protocol sets
def test_check_against_protocol_names_everything():
    check_against_protocol(get_protocol("pr50k3"), "k", 3, 3)
    check_against_protocol("pr50k3", "span", (1, 2), [1, 2])
    with pytest.raises(ValueError) as err:
        check_against_protocol(get_protocol("pr50k3"), "k", 5, 3)
    assert all(s in str(err.value) for s in ("`k`", "5", "'pr50k3'", "3"))
    with pytest.raises(ValueError):
        check_against_protocol("prdc", "flag", True, 1)  # a bool is not a number


def test_metric_arguments_of_each_protocol():
    assert metric_arguments("prdc")["ball"] == "open"
    fid = metric_arguments("fid")
    assert (fid["k_precision_recall"], fid["k_density_coverage"], fid["frechet"]) == (3, None, True)
    assert metric_arguments("cmmd")["cmmd"] and metric_arguments("cmmd")["k_precision_recall"] is None
    assert all(metric_arguments(name)[family] is False for name in available_protocols() for family in ("prd",))


def test_resolve_arguments_fills_only_the_arguments_left_unset():
    unset = {"k_precision_recall": Default(3), "ball": Default("closed"), "kid": True}
    out = resolve_arguments("prdc", unset)
    assert (out["k_precision_recall"], out["ball"], out["kid"]) == (5, "open", True)
    assert resolve_arguments("prdc", {"k_precision_recall": 5})["k_precision_recall"] == 5
    # a value written out is given, even when it equals the signature's default
    for name, value in (("k_precision_recall", 3), ("ball", "closed")):
        with pytest.raises(ValueError, match=f"`{name}` to agree with protocol 'prdc'"):
            resolve_arguments("prdc", {**unset, name: value})
    with pytest.raises(ValueError, match="no argument `defaults`"):
        resolve_arguments("prdc", unset, {"ball": "closed"})


def _sets(n=150, m=120, d=6, seed=0):
    g = np.random.default_rng(seed)
    return g.normal(size=(n, d)).astype(np.float32), (0.8 * g.normal(size=(m, d)) + 0.3).astype(np.float32)


def test_generative_metrics_prdc_protocol_equals_the_prdc_package():
    prdc = pytest.importorskip("prdc", reason="the prdc package is the reference of the 'prdc' protocol")
    real, fake = _sets()
    metric = GenerativeMetrics(protocol="prdc")
    metric.update(torch.from_numpy(real), real=True)
    metric.update(torch.from_numpy(fake), real=False)
    out = metric.compute()
    assert sorted(out) == ["coverage", "density", "precision", "recall"]
    want = prdc.compute_prdc(real, fake, nearest_k=5)
    for key in want:
        assert float(out[key]) == pytest.approx(float(want[key]), abs=1e-6), key


def test_generative_metrics_pr50k3_protocol_equals_the_closed_ball_oracle():
    real, fake = _sets(seed=1)
    metric = GenerativeMetrics(protocol="pr50k3", kid=dict(subset_size=50))
    metric.update(torch.from_numpy(real), real=True)
    metric.update(torch.from_numpy(fake), real=False)
    out = metric.compute()
    precision, recall = oracle.precision_recall(real, fake, k=3)
    assert float(out["precision"]) == pytest.approx(precision) and float(out["recall"]) == pytest.approx(recall)
    assert "kid" in out and "frechet_distance" not in out and "density" not in out  # kid: not the protocol's
    assert metric.protocol == "pr50k3"


@pytest.mark.parametrize(
    "kwargs, named",
    [
        ({"k_precision_recall": 4}, ("`k_precision_recall`", "4", "'prdc'", "5")),
        ({"ball": "open", "protocol": "pr50k3"}, ("`ball`", "'open'", "'pr50k3'", "'closed'")),
        ({"prd": {"num_clusters": 5}}, ("`prd`", "num_clusters", "False")),
    ],
)
def test_generative_metrics_explicit_contradictions_raise(kwargs, named):
    kwargs = {"protocol": "prdc", **kwargs}
    with pytest.raises(ValueError) as err:
        GenerativeMetrics(**kwargs)
    assert all(s in str(err.value) for s in named), str(err.value)


def test_generative_metrics_values_that_agree_are_fine_and_given_defaults_that_contradict_raise():
    m = GenerativeMetrics(protocol="prdc", k_precision_recall=5, ball="open", prd=False)
    assert (m.k_precision_recall, m.k_density_coverage, m.ball, m.prd) == (5, 5, "open", None)
    unset = GenerativeMetrics(protocol="prdc")
    assert (unset.k_precision_recall, unset.ball) == (5, "open")
    for given in (dict(ball="closed"), dict(k_precision_recall=3), dict(realism=True)):  # each equals a default
        with pytest.raises(ValueError, match="to agree with protocol 'prdc'"):
            GenerativeMetrics(protocol="prdc", **given)
    with pytest.raises(ValueError, match="fid50k"):
        GenerativeMetrics(protocol="fid50k")


# ---------------------------------------------------------------------------- the fingerprint
def test_fingerprint_reads_the_extractor_attributes():
    net = StandIn()
    net.weights_sha256 = "ab" * 32
    fp = fingerprint(net, protocol="pr50k3", num_real=10, num_fake=7, dtype=torch.float16)
    assert tuple(fp) == FINGERPRINT_KEYS
    assert json.loads(json.dumps(fp)) == fp
    want = {"protocol": "pr50k3", "extractor": "stand-in", "weights_sha256": "ab" * 32, "resize": "tf1"}
    assert {k: fp[k] for k in want} == want
    assert (fp["quantisation"], fp["input_size"], fp["dtype"]) == ("floor", [8, 8], "float16")
    assert (fp["num_real"], fp["num_fake"], fp["k_precision_recall"], fp["ball"], fp["version"]) == (
        10,
        7,
        3,
        "closed",
        __version__,
    )


def test_fingerprint_defaults_for_any_extractor():
    fp = fingerprint(RandomConvNet(num_features=4, size=16), k_precision_recall=5, ball="open")
    assert (fp["extractor"], fp["weights_sha256"], fp["input_size"]) == ("RandomConvNet", None, [16, 16])
    assert fp["resize"] == "torch-bilinear-antialias" and fp["quantisation"] == "none" and fp["dtype"] == "float32"
    assert fingerprint(lambda x: x)["extractor"] == "function"
    bare = fingerprint(protocol="fd-dinov2")
    assert (bare["extractor"], bare["k_precision_recall"], bare["ball"]) == ("dinov2", None, None)
    assert fingerprint()["extractor"] == "identity"


def test_fingerprint_differences():
    a = fingerprint(Identity(), num_real=100, num_fake=50, k_precision_recall=3, ball="closed")
    assert fingerprint_differences(a, dict(a)) == {}
    b = dict(a, num_fake=60, ball="open", version="9.9.9")
    assert fingerprint_differences(a, b) == {"num_fake": (50, 60), "ball": ("closed", "open")}
    assert fingerprint_differences(a, b, ignore=())["version"] == (__version__, "9.9.9")
    without = {key: v for key, v in a.items() if key != "k_precision_recall"}
    assert fingerprint_differences(a, without) == {"k_precision_recall": (3, None)}
    assert fingerprint_differences(a, {**without, "k": 3}) == {}  # an old fingerprint's key is read as the new one
    assert fingerprint_differences(a, {**without, "k": 5}) == {"k_precision_recall": (3, 5)}
    assert fingerprint_differences({"input_size": (299, 299)}, {"input_size": [299, 299]}) == {}


def test_describe_extractor():
    assert describe_extractor(Identity()) == {"name": "identity", "weights_sha256": None, "preprocessing": {}}
    pre = describe_extractor(RandomConvNet(size=16))["preprocessing"]
    assert pre["normalisation"] == {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}


# ---------------------------------------------------------------------------- features support
def test_extract_features_concatenates_dict_outputs_per_key():
    x = torch.randn(11, 5)

    def two(batch):
        return {"pool": batch * 2, "logits": batch[:, :3].exp()}

    out = extract_features(two, x, batch_size=4)
    assert sorted(out) == ["logits", "pool"]
    torch.testing.assert_close(out["pool"], x * 2, rtol=0, atol=0)
    torch.testing.assert_close(out["logits"], x[:, :3].exp(), rtol=0, atol=0)


def test_extract_features_checks_dict_outputs():
    x = torch.randn(6, 4)
    calls = []

    def changing(batch):
        calls.append(1)
        return {"a": batch} if len(calls) == 1 else {"b": batch}

    with pytest.raises(ValueError, match="same outputs"):
        extract_features(changing, x, batch_size=3)
    with pytest.raises(ValueError, match="output 'a'"):
        extract_features(lambda b: {"a": b[:1]}, x, batch_size=3)
    with pytest.raises(TypeError, match="dict of them"):
        extract_features(lambda b: [b], x)
    with pytest.raises(TypeError, match="output 'a'"):
        extract_features(lambda b: {"a": b.numpy()}, x)
    assert isinstance(extract_features(Identity(), x), torch.Tensor)


def test_load_into_names_keys_never_tensors():
    net = nn.Sequential(*[nn.Linear(3, 3) for _ in range(12)])
    state = {k: v for k, v in net.state_dict().items() if not k.endswith("bias")}
    state["0.weight"] = torch.full((3, 5), 123456.0)
    state.update({f"extra{i}": torch.zeros(1) for i in range(10)})
    with pytest.raises(ValueError) as err:
        load_into(net, state, "Net", "/weights/net.pth")
    text = str(err.value)
    assert "'0.bias'" in text and "and 4 more" in text  # 12 missing biases, 8 shown
    assert "'extra0'" in text and "and 2 more" in text
    assert "'0.weight' is (3, 5) in the file, (3, 3) in the model" in text
    assert "123456" not in text and "tensor(" not in text and "/weights/net.pth" in text
    assert state_dict_mismatch(net, net.state_dict()) == []
    load_into(net, net.state_dict(), "Net", "fine")


def test_load_into_accepts_files_without_batch_norm_counters():
    """Older state dicts (torch-fidelity's FID Inception) lack ``num_batches_tracked``; torch fills it in."""
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    with torch.no_grad():
        net[1].running_mean.fill_(0.5)
    state = {k: v.clone() for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")}
    fresh = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    assert state_dict_mismatch(fresh, state) == []
    load_into(fresh, state, "Net", "old.pth")
    assert torch.equal(fresh[1].running_mean, torch.full((4,), 0.5))
    del state["1.running_var"]
    assert state_dict_mismatch(fresh, state) == ["missing keys: '1.running_var'"]


def test_file_sha256_is_hashlib_and_follows_changes(tmp_path):
    path = tmp_path / "w.bin"
    path.write_bytes(b"first")
    assert file_sha256(path) == hashlib.sha256(b"first").hexdigest()
    path.write_bytes(b"second, longer")
    os.utime(path, ns=(1, 2))
    assert file_sha256(str(path)) == hashlib.sha256(b"second, longer").hexdigest()


def test_resolve_weights_finds_the_other_tools_cache_names(hub, tmp_path):
    (hub / TORCH_FIDELITY_INCEPTION).write_bytes(b"x")
    found = resolve_weights(
        None,
        model="m",
        filename="pt_inception-2015-12-05-6726825d.pth",
        url="u",
        random_init=False,
        also=(TORCH_FIDELITY_INCEPTION,),
    )
    assert found == hub / TORCH_FIDELITY_INCEPTION
    elsewhere = tmp_path / "inception-2015-12-05.pt"
    elsewhere.write_bytes(b"y")
    assert resolve_weights(None, model="m", filename="a.pth", url="u", random_init=False, also=(str(elsewhere),)) == (
        elsewhere
    )
