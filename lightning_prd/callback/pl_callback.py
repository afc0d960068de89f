"""``PRDCallback``: :class:`~lightning_prd.callback.core.PRDCallbackCore` mixed with
``pytorch_lightning.Callback`` (:mod:`lightning_prd.lightning` mixes it with ``lightning.pytorch``'s)."""

from __future__ import annotations

import pytorch_lightning as pl

from lightning_prd.callback.core import PRDCallbackCore


class PRDCallback(PRDCallbackCore, pl.Callback):
    """Sample the model every N epochs and log precision, recall, density, coverage, PRD and α/β scores.

    **When it runs** (:mod:`lightning_prd.callback.schedule`). An epoch due under ``every_n_epochs`` is
    scored at the end of its last validation run if it validates at its end (so ``ModelCheckpoint``
    and ``EarlyStopping`` read fresh values), otherwise at the end of its training epoch; once,
    never in the sanity check, only while fitting. When the fit ends on weights no evaluation has
    seen, ``evaluate_on_train_end`` scores them once more, logged at the last epoch reached with
    ``"final": True`` in ``history``. The module is sampled in eval mode under ``no_grad``; every
    submodule's training flag is restored afterwards.

    **Fixed noise, untouched RNG.** The states of torch (CPU and the module's CUDA, MPS or XPU device), Python
    ``random`` and NumPy are restored after each evaluation, whatever the generator, the extractor,
    the metric's ``compute`` and the loggers draw: the training run is the one without the callback.
    Inside, the generated samples are drawn in global batches of ``batch_size``, batch ``b`` with every
    generator seeded with its own seed (``seed`` for batch 0; :mod:`lightning_prd.callback.batches`): the
    same latent codes at every evaluation, whatever the number of processes. The real side and ``compute``
    are drawn with seeds derived from ``seed`` (:mod:`lightning_prd.callback.rng`), so an evaluation
    depends on the weights and ``seed`` only, even with a stochastic extractor.

    **Distributed.** Rank ``r`` of ``W`` generates a contiguous run of the global batches (the runs differ
    by at most one batch, :func:`~lightning_prd.callback.batches.rows_of`) and embeds its contiguous block
    of the real rows (:func:`rank_shard`: no duplicates, and the gathered sets keep the single-process
    order). The metric all-gathers the features and every rank computes the same values, so every rank
    must reach the hook (it does under Lightning). Real features are extracted once per fit (first
    evaluation) and kept, with their k-NN radii, by ``GenerativeMetrics(reset_real_features=False)``.

    Args:
        real: the real set, one of (:mod:`~lightning_prd.callback.real_sources`):

            * a tensor of real samples ``[N, ...]`` or a DataLoader (any iterable) of batches
              (a tensor, or a tuple/list whose first item is the tensor). A plain DataLoader must
              yield the same rows in the same order on every rank (``shuffle=False``; a shuffling
              one raises under DDP); its size is ``len(loader.dataset)`` (or counted in one pass);
              each rank reads it up to the end of its block and embeds only its rows. A DataLoader
              with a ``DistributedSampler`` is read as this rank's shard **without the padding
              duplicates** the sampler adds when the world size does not divide the dataset
              (:mod:`lightning_prd.samplers`): the k-NN scores equal the single-process ones; the
              gathered order differs, so PRD's seeded clustering (and Fréchet's last digits) may too.
            * ``"datamodule:train"``, ``"datamodule:val"``, ``"datamodule:test"`` or
              ``"datamodule:predict"``: in ``setup`` the callback calls that loader hook of
              ``trainer.datamodule`` once (``ValueError`` naming the value when there is no datamodule
              or it defines no such hook) and reads **its dataset in index order**, with the loader's
              batch size, ``collate_fn`` and ``num_workers`` but not its sampler: a shuffling train
              loader gives the same rows, in the same order, on every rank and in every fit (an
              iterable-style dataset is read as the loader yields it). Then as a DataLoader above.
            * a path (``str`` or ``os.PathLike``) to a folder: its ``.png``/``.jpg``/``.jpeg`` files,
              recursively, in sorted path order, as uint8 RGB ``[B, 3, H, W]``, embedded with
              ``feature_extractor`` (required; Pillow needed). A batch holds consecutive images of
              one size, so each image is resized from its own size by the extractor's own resize and
              the features do not depend on ``batch_size``
              (:mod:`~lightning_prd.features.image_folder`).
            * a path to a file that :func:`~lightning_prd.features.reference_files.read_reference`
              reads (told by its content: ``.npy``/``.npz``/``torch.save``/pickle; our features
              files, clean-fid, torch-fidelity, dgm-eval, NVlabs, EDM2, pytorch-fid,
              guided-diffusion). **Per-sample features are used as they are**: never passed
              through ``feature_extractor`` (which still embeds the generated samples), the first
              ``num_real`` rows, rank ``r`` taking its :func:`rank_shard` block, the disk cache not
              used. guided-diffusion's images are embedded like a tensor of images. A file of
              statistics only (``mu``/``sigma``) serves the Fréchet distance: the metric must ask
              for nothing else, e.g. ``metric=dict(k_precision_recall=None, k_density_coverage=None,
              prd=False, alpha_beta=False, probabilistic=False, pr_cover=False)`` (else
              ``ValueError`` at construction saying what the file holds and what would serve), and
              its mean and covariance go to ``metric.set_real_statistics`` before each evaluation.
              When the file names the network that made it and ``feature_extractor`` was given by
              name, different networks raise ``ValueError``; when the names cannot settle it, or the
              file names none, one warning says the features must come from the same network.

            A missing path, an empty image folder or an unreadable file raises at construction,
            naming ``real`` and the path. A string starting with ``datamodule:`` is never a path.
            With a per-class metric (``metric=dict(per_class=True)``) a DataLoader's (or datamodule's)
            batches are ``(samples, labels, ...)``, one integer class label per sample; a tensor, a folder
            or a features file takes its labels from ``real_labels``.
        sample_fn: ``sample_fn(pl_module, n) -> Tensor`` of ``n`` generated samples, or its import
            path ``"package.module:function"`` (or ``"package.module.function"``), imported at
            construction (``TypeError`` when it does not import or is not callable). Default:
            ``pl_module.sample(n)``; ``setup`` raises ``ValueError`` when neither exists.
            Called with ``n <= batch_size`` (one global batch), repeatedly, inside the seeded RNG. With a
            per-class metric it returns ``(samples, labels)``: ``n`` samples and a 1-D integer tensor of
            their ``n`` class labels (the classes they were conditioned on); without one, a tuple is
            refused. Floating-point samples must be finite; errors about the generated samples or their features name
            ``sample_fn`` (or ``<Module>.sample``), and errors of the extractor name ``feature_extractor``.
        feature_extractor: module or callable mapping a batch of samples to ``[n, D]`` features,
            applied to real and generated samples alike, under ``no_grad`` in eval mode (an
            ``nn.Module`` is moved to the module's device). Also a registered name
            (``"inception"``, ``"random-cnn"``, ``"module:callable"``; :func:`~lightning_prd.features.get_extractor`),
            a dict ``{"name": ..., "weights": PATH, **options}`` built the same way, or
            ``{"class_path": ..., "init_args": {...}}``; one that cannot be built raises
            ``TypeError`` at construction, naming the value and why. Default: identity (samples
            flattened to ``[n, -1]``). With a ``protocol`` that names a network, leave it out (or name that
            network, or give a dict of options that agree with the protocol's, e.g. ``{"random_init": True}``).
        num_samples: generated samples per evaluation, over all ranks. Default (None): the protocol's
            count of generated samples, else 2048.
        num_real: use at most this many real samples (the first ones). Default (None): the protocol's count,
            else all.
        every_n_epochs: evaluate every N epochs.
        prefix: key prefix of everything logged.
        metric: ``None`` (``GenerativeMetrics(reset_real_features=False)``), a dict of
            ``GenerativeMetrics`` options (a mapping in a LightningCLI config), or a Metric with
            ``update(features, real: bool)``, ``compute() -> dict`` and ``reset()``. With
            ``reset_real_features=True`` the real features are extracted again at each evaluation.
        seed: base seed of the fixed noise.
        log_curves: log curves and figures (scalars are always logged).
        batch_size: samples per generator call (the global batches of the noise, above), and rows per
            read of the real set. On ``torch.OutOfMemoryError`` in the generator it halves (down to 1), the
            evaluation's generated side is drawn again from its start at the new size, one warning names the
            size that worked, and that size is kept for later evaluations: the scores are those of a run at
            that size from the start.
        extract_batch_size: rows per call of ``feature_extractor``. Default (None): the extractor's
            ``default_batch_size`` (each built-in network declares one that fits a 24 GB card beside a
            model in training, e.g. 128 for the FID Inception, 64 for VGG-16); 64 for other modules; without a
            network, with :class:`~lightning_prd.features.Identity` or a plain function, each chunk as it comes
            (a batch of generated samples, a chunk of the real set as read).
            Halved on ``torch.OutOfMemoryError`` like ``batch_size``: the generated side starts again, a real
            chunk is embedded again, and the size that worked is kept (one warning).
        log_images: when samples are images ``[n, 1 or 3, H, W]``, also log (rank 0, TensorBoard and
            W&B) a grid of the ``num_images`` least realistic generated samples, a grid of real samples
            that no generated sample covers (the modes the model misses) and a histogram of realism
            scores under ``<prefix>samples/...`` and ``<prefix>realism``. Off by default: rank 0 keeps its
            generated samples of the evaluation in CPU memory until they are logged.
        num_images: images per grid.
        evaluate_on_train_end: score the final weights when the fit ends on weights that were
            not scored (see *When it runs*). Every rank takes part (the metric all-gathers).
        cache_dir: a folder (or a :class:`~lightning_prd.features.cache.RealFeatureCache`) where the
            real features are kept across runs: a later fit with the same real samples (as read, in
            any order, under any world size), extractor (class, weights, every public setting),
            ``num_real`` and dtype loads them instead of calling the extractor. An extractor setting
            the key cannot cover is refused with a ``TypeError`` naming it; the cache stores copies of
            the features, so an extractor that refills one output buffer is cached as computed. The
            key is described in :mod:`lightning_prd.features.cache`; a plain function as extractor
            needs ``RealFeatureCache(PATH, name=...)``. Default None: no disk cache. It serves ``real``
            only: ``test`` is embedded at the first evaluation of every fit and stays out of the key.
        test: a held-out real set the model never trained on, in any form ``real`` takes but a
            statistics file (tensor, DataLoader, ``"datamodule:test"``, image folder, features file),
            read and embedded like ``real`` (each rank its block under DDP, a file's features as they
            are) and given to the metric as ``update(features, role="test")``, for the scores that
            compare the training set ``real`` with held-out data: ``metric=dict(data_copying=True)``
            (``Pct``, ``Pct_cells``) and ``metric=dict(fld=True)`` (``Pfld``, ``Pfld_gap``, ...). ``setup``
            raises ``ValueError`` naming ``test`` when such a score is on without it, or when it is
            given and no score uses it. Example: ``PRDCallback(train_x, test=held_out_x,
            metric=dict(data_copying=True))``.
        num_test: use at most this many samples of ``test`` (the first ones, like ``num_real``; under
            DDP each rank reads its block of them). Default (None): all of them.
        real_labels: with a per-class metric (``metric=dict(per_class=True)``) and ``real`` a tensor, an
            image folder or a features file: one integer class label per row of ``real``, in its order (a
            1-D tensor, array or list; the first ``num_real`` are used). A DataLoader's batches carry
            their own. Refused (``ValueError``/``TypeError`` naming ``real_labels`` and its shape or
            dtype) when not integer, not one per row, or without a per-class metric. Example:
            ``PRDCallback(x, real_labels=y, sample_fn=lambda m, n: m.sample_with_labels(n),
            metric=dict(per_class=True))``.
        class_names: with a per-class metric, names for the class labels in the per-class charts and columns:
            a list (class ``i`` is ``class_names[i]``) or a mapping ``{label: name}``; labels without a name keep
            their number. Names are distinct, non-empty and without ``/``. ``prd/lowest_coverage_class`` stays the
            integer label. Given without a per-class metric it raises ``ValueError``.
        log_closest_pairs: the number of (generated, nearest real) pairs to show, 0 (default) for
            none. The metric picks the pairs of smallest ratio of distance to the real sample's own
            ``NND_1`` (``GenerativeMetrics(closest_pairs=n)``, the likeliest copies; also returns
            ``authenticity``); for image samples ``[n, 1 or 3, H, W]`` and a real set of images, rank 0
            logs ``Psamples/closest_pairs`` (TensorBoard image, W&B ``wandb.Image``): one pair per row,
            generated on the left, nearest real on the right
            (:mod:`~lightning_prd.callback.closest_pairs`). Each rank keeps its generated samples of the
            evaluation in CPU memory until the pairs are known and re-reads its block of ``real`` up
            to the last row shown. Example: ``PRDCallback(images, log_closest_pairs=8)``.
        protocol: a named protocol (:mod:`lightning_prd.protocols`: ``"fid"``, ``"pytorch-fid"``,
            ``"clean-fid"``, ``"pr50k3"``, ``"fd-dinov2"``, ``"cmmd"``, ``"prdc"``) or a
            :class:`~lightning_prd.protocols.Protocol`: it sets the extractor (its network and preprocessing,
            built from ``weights``), the metric's k, ball and score families (``GenerativeMetrics(protocol=...)``),
            ``num_samples`` and ``num_real`` where it names those counts, at once. What counts as explicit
            (:mod:`~lightning_prd.callback.protocol`): ``num_samples``/``num_real`` given (not None) must equal
            the protocol's counts; a ``metric`` dict option left out takes the protocol's value (one written
            out, even at its default, is explicit); a ``feature_extractor`` must name the protocol's network. A
            contradiction raises ``ValueError`` naming the argument, its value, the protocol and the protocol's
            value. Example:
            ``PRDCallback("data/ffhq", protocol="pr50k3", weights="vgg16.pt")``: NVlabs' VGG-16, k = 3,
            closed balls, 50,000 generated against the first 50,000 real images.
        weights: the weights file of the protocol's network (checked to be the protocol's file: its name or
            SHA-256; ``ValueError`` naming the expected file and where to get it). None looks for the
            protocol's files in torch's hub cache (never downloads; ``TypeError`` at construction saying what
            to get). Without a protocol, the weights of an extractor given by name
            (``feature_extractor="vgg16", weights=PATH``).
        verbose: after each evaluation, show one line from global rank zero (through the progress bar while one
            is enabled, on a line of its own; else at level INFO through Lightning's ``rank_zero_info``):
            the epoch, precision, recall, density, coverage, the Fréchet distance (those the metric returns)
            and the evaluation's wall time, e.g. ``lightning_prd: epoch 3 · precision 0.712 · recall 0.655 ·
            density 0.930 · coverage 0.810 · frechet_distance 12.3 · 4.2 s``
            (:mod:`~lightning_prd.callback.report`). ``verbose=False`` (``verbose: false`` in a LightningCLI
            config) prints nothing.
        image_range: ``(low, high)``, the range of the generated floating-point images, mapped with
            ``(x - low) / (high - low)`` to the ``[0, 1]`` the image extractors take before the extractor (and
            the sample grids) see them: ``image_range=(-1, 1)`` for a generator ending in ``tanh`` (the DCGAN
            convention). Generated values outside it raise ``ValueError`` naming ``sample_fn``. uint8 samples
            and the real set are taken as they are. Default None: as they are (uint8 0..255, floats 0..1).
        extractor_precision: the precision ``feature_extractor`` runs in (:mod:`lightning_prd.features.precision`):
            ``"ieee"`` (default) runs it without autocast and with IEEE float32 matmuls and convolutions (cuDNN
            and cuBLAS TF32 off, oneDNN likewise), whatever the training set, the caller's settings restored
            after: the features are the reference tools'. ``"fast"`` keeps the caller's TF32 and autocast
            settings: faster on GPUs, features not bit-comparable with the references'. The precision used is
            in the fingerprint (``extractor_precision``) and the ``cache_dir`` key.

    **Before training** (:mod:`~lightning_prd.callback.dry_run`): in ``on_fit_start`` the callback embeds two
    generated samples and the real set's first two rows, in eval mode under ``no_grad`` with the RNG restored,
    and refuses in one line what would fail at the first evaluation: images outside the extractor's range
    (the message names ``image_range``), a width other than the real features', a dtype, a device.

    **In a LightningCLI config** every argument takes a plain YAML value: ``real`` a path or
    ``datamodule:<split>``, ``sample_fn`` an import path, ``feature_extractor`` a name or a mapping,
    ``metric`` a mapping of options, ``cache_dir`` a path (``examples/config.yaml``):

        trainer:
          callbacks:
            - class_path: lightning_prd.PRDCallback
              init_args:
                real: datamodule:train
                num_samples: 512
                metric: {prd: false, alpha_beta: false}

    and with a protocol (``protocol: pr50k3`` and ``weights: /path/vgg16.pt`` set the network, k, ball and
    counts; ``num_samples`` left out).

    Logged keys (``P`` = ``prefix``, default ``"prd/"``). Every 0-dim value of the metric's
    ``compute()`` is logged as ``P<name>``; with the default metric:

    * ``Pprecision``, ``Precall``: k-NN precision and recall (Kynkäänniemi et al. 2019, k=3);
    * ``Pdensity``, ``Pcoverage``: Naeem et al. 2020, k=5;
    * ``Pp_precision``, ``Pp_recall``: probabilistic precision and recall (Park & Kim 2023);
      ``Pprecision_cover``, ``Precall_cover``: PR-cover (Cheema & Urner 2023), on sets large
      enough for their radii;
    * ``Pfrechet_distance``: the FID formula on the features (lower is better);
    * when the metric returns them: ``Pf_beta``, ``Pf_inv_beta`` (PRD F_8, F_1/8),
      ``Palpha_precision``, ``Pbeta_recall``, ``Pauthenticity``; with ``metric=dict(kid=True)``
      ``Pkid``, ``Pkid_std``; with ``metric=dict(vendi=True)`` ``Pvendi``, ``Pvendi_real``;
    * with ``test`` and ``metric=dict(data_copying=True)``: ``Pct``, ``Pct_cells``; with
      ``metric=dict(fld=True)``: ``Pfld``, ``Pfld_train``, ``Pfld_gap``, ``Pfld_nll_test``, ...;
    * with ``metric=dict(per_class=True)``: ``Pper_class/<score>/<class>`` for precision, recall,
      density, coverage and the Fréchet distance of each class, ``P<score>_mean``, ``Pcoverage_min``
      and ``Plowest_coverage_class``; TensorBoard's *Custom Scalars* gets a category ``Pper_class``
      with one chart per score whose lines are the classes, W&B a line series per score
      (``Pper_class/<score>``), CSV one column per class.

    They go to ``trainer.callback_metrics`` on every rank (so ``ModelCheckpoint(monitor=
    "prd/coverage", mode="max")`` works; for early stopping use
    :class:`~lightning_prd.callback.PRDEarlyStopping`, whose patience counts evaluations, as a plain
    ``EarlyStopping`` fails on the epochs ``every_n_epochs`` skips) and, from rank 0, to every logger:
    TensorBoard at the step Lightning logs the epoch's own metrics at (that of its last training batch), with
    ``Pepoch`` at that step; W&B with a ``Pepoch`` step metric, ``trainer/global_step`` and best-value
    summaries; CSV and other loggers through ``log_metrics`` at that step with an ``epoch`` column. Curves
    (when ``log_curves``; PRD from ``prd_precision``/``prd_recall``, α/β from ``alphas``,
    ``alpha_precision_curve``, ``beta_recall_curve``):

    * ``Pprd_curve``: TensorBoard PR-curve dashboard entry per evaluation; W&B line chart over an
      accumulated table (one line per epoch);
    * ``Pfigures/prd_curve``, ``Pfigures/alpha_beta``, ``Pfigures/trajectory`` (precision over
      recall across epochs): TensorBoard images, W&B ``wandb.Image``;
    * CSV (and any logger with a ``log_dir``): ``<log_dir>/prd_curves/epoch_NNNN.csv`` and
      ``<log_dir>/alpha_beta_curves/epoch_NNNN.csv``; with another prefix the folders carry it
      (``prefix="gen/"``: ``<log_dir>/gen/prd_curves/...``);
    * TensorBoard *Custom Scalars*: a category ``P`` with one chart per logged score.

    Several callbacks with different prefixes on one logger keep their keys, files, Custom Scalars
    categories (one merged layout per writer) and W&B tables apart.

    With no logger, or one that shows no curves, one warning says curves are skipped. Between
    evaluations (``every_n_epochs > 1``) ``callback_metrics`` keeps the last values: give
    ``ModelCheckpoint`` the same ``every_n_epochs`` so it does not act on stale scores.

    **The fingerprint** (:attr:`fingerprint`, from the first evaluation of a fit on): a flat JSON dict of
    how the scores were made (:func:`lightning_prd.protocols.fingerprint`): ``protocol``, ``extractor``,
    ``weights_sha256``, ``resize``, ``quantisation``, ``input_size``, ``dtype`` (of the k-NN distances),
    ``num_real`` (the real rows every rank fed to the metric together) and ``num_fake``, ``k``
    (precision/recall's) and ``k_density_coverage``, ``ball``, ``version``. It is logged once per fit, from
    rank 0, to every logger before the first scores: TensorBoard's *HParams* tab (``Pfingerprint/<field>`` beside
    the module's hyperparameters, the scores as metrics, with either ``default_hp_metric``:
    :mod:`~lightning_prd.loggers.tensorboard_hparams`), ``hparams.yaml`` and the text ``Pfingerprint``; W&B
    ``run.config["Pfingerprint"]``; CSV ``fingerprint.json`` and ``hparams.yaml``; other loggers
    ``log_hyperparams``. ``lightning-prd runs`` shows it per run and warns
    when the runs compared differ in it. A protocol whose real count the real set does not reach is warned
    about once.

    **Checkpoint state**: ``history`` (one dict of plain scores per evaluation, with ``"epoch"``),
    ``prd_curves`` (each evaluation's PRD curve, at most 127 float16 points; about 0.8 kB
    per evaluation in all) and ``fingerprint`` (a resumed fit whose fingerprint differs from the
    checkpoint's warns once, naming the fields). A resumed run never re-evaluates an epoch already in ``history``,
    draws the trajectory figure over every epoch and rebuilds the W&B ``Pprd_curve`` table with
    every epoch once. An epoch logged after the last checkpoint (a killed run) is logged again
    by the resumed run; ``tensorboard --logdir`` (its default data server) keeps, per tag, the
    newest event when a step repeats, so it shows each epoch once (``--load_fast=false``, the
    older reader, shows such an epoch twice).

    Example:
        >>> import torch
        >>> from lightning_prd.callback import PRDCallback
        >>> real = torch.randn(512, 2)
        >>> cb = PRDCallback(real, sample_fn=lambda module, n: torch.randn(n, 2), num_samples=512)
        >>> cb.state_key
        "PRDCallback{'prefix': 'prd/'}"

        Then ``pl.Trainer(callbacks=[cb, ModelCheckpoint(monitor="prd/coverage", mode="max")]).fit(model)``.
    """
