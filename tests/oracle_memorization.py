"""Float64 NumPy/SciPy oracles of FD∞, C_T, FLD and the nearest-training-neighbour view, each written from its
paper's formula along the official code named in its docstring (which cannot be imported here: dgm-eval is not
on PyPI, ``marcojira/fld`` pins a CLIP build from GitHub). Brute force; no import from ``lightning_prd``.

The random draws are the ones our functions document (a CPU ``torch.Generator`` seeded with ``seed``): the
callers pass the drawn indices in, so every oracle itself is deterministic NumPy.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg
from scipy.stats import mannwhitneyu

# --------------------------------------------------------------------------------------------------
# FD∞: layer6ai-labs/dgm-eval, dgm_eval/metrics/fd.py (compute_FD_infinity, compute_FD_with_stats)
# --------------------------------------------------------------------------------------------------


def fd_with_stats(mu1, mu2, sigma1, sigma2):
    """``||mu1 - mu2||^2 + Tr(S1 + S2 - 2 sqrtm(S1 S2))`` with scipy's sqrtm, as dgm-eval."""
    covmean = linalg.sqrtm(sigma1 @ sigma2)
    covmean = np.real(covmean)
    diff = mu1 - mu2
    return float(diff @ diff + np.trace(sigma1) + np.trace(sigma2) - 2 * np.trace(covmean))


def dgm_eval_sizes(num_fake, num_points=15):
    """``np.linspace(min(5000, max(M // 10, 2)), M, num_points).astype('int32')``."""
    return np.linspace(min(5000, max(num_fake // 10, 2)), num_fake, num_points).astype("int32")


def fd_infinity(real, fake, subsets):
    """FD at each subset of ``fake`` (index arrays) against all of ``real``; least-squares line in 1/N; the
    intercept, the slope and the FD values (sklearn's LinearRegression is ordinary least squares)."""
    real, fake = np.asarray(real, np.float64), np.asarray(fake, np.float64)
    mu1, s1 = real.mean(0), np.cov(real, rowvar=False)
    fds, sizes = [], []
    for idx in subsets:
        sub = fake[np.asarray(idx)]
        fds.append(fd_with_stats(mu1, sub.mean(0), s1, np.cov(sub, rowvar=False)))
        sizes.append(len(idx))
    x = 1.0 / np.asarray(sizes, np.float64)
    slope, intercept = np.polyfit(x, np.asarray(fds), 1)
    return float(intercept), float(slope), np.asarray(fds)


# --------------------------------------------------------------------------------------------------
# C_T: layer6ai-labs/dgm-eval, dgm_eval/metrics/ct.py (from casey-meehan/data-copying)
# --------------------------------------------------------------------------------------------------


def _nn_dist(train, queries):
    d = np.sqrt(((queries[:, None, :] - train[None, :, :]) ** 2).sum(-1))
    return d.min(1)


def z_u(test, fake, train):
    """ct.py's ``Zu``: Mann-Whitney U of the fake-to-train against test-to-train NN distances, z-scored with
    the reference's continuity correction (mean ``n m / 2 - 0.5``)."""
    lq, lp = _nn_dist(train, fake), _nn_dist(train, test)
    u = mannwhitneyu(lq, lp, alternative="less").statistic
    m, n = len(fake), len(test)
    return (u - (n * m / 2 - 0.5)) / np.sqrt(n * m * (n + m + 1) / 12)


def c_t_from_labels(test, test_labels, fake, fake_labels, train, train_labels, tau):
    """ct.py's ``C_T``: test-share-weighted mean of the per-cell ``Zu`` over cells with ``Q_m(pi) > tau``."""
    k = int(train_labels.max()) + 1
    m, n = len(fake), len(test)
    q_share = np.bincount(fake_labels, minlength=k) / m
    p_share = np.bincount(test_labels, minlength=k) / n
    keep = q_share > tau
    z = np.zeros(k)
    for c in range(k):
        if (fake_labels == c).any():
            z[c] = z_u(test[test_labels == c], fake[fake_labels == c], train[train_labels == c])
    return float(p_share[keep] @ z[keep] / p_share[keep].sum()), z


def c_t(train, test, fake, *, num_cells=3, pca_dim=64, seed=0):
    """ct.py's ``compute_CTscore`` with an exact PCA (``svd_solver="full"``) and a seeded KMeans."""
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA

    train, test, fake = (np.asarray(a, np.float64) for a in (train, test, fake))
    if train.shape[1] > pca_dim:
        pca = PCA(n_components=pca_dim, svd_solver="full").fit(train)
        train, test, fake = pca.transform(train), pca.transform(test), pca.transform(fake)
    km = KMeans(n_clusters=num_cells, n_init=10, random_state=seed).fit(train)
    labels = [km.predict(a) for a in (train, test, fake)]
    return c_t_from_labels(test, labels[1], fake, labels[2], train, labels[0], tau=20 / len(fake))[0]


# --------------------------------------------------------------------------------------------------
# FLD: marcojira/fld, fld/MoG.py (MoG.fit, get_dim_adjusted_nlls) and fld/metrics/FLD.py
# --------------------------------------------------------------------------------------------------


def _logsumexp(a, axis):
    top = a.max(axis=axis, keepdims=True)
    return (top + np.log(np.exp(a - top).sum(axis=axis, keepdims=True))).squeeze(axis)


def _sq_dists(x, mus):
    """Squared distances by direct differences (exact; small sets only)."""
    return ((x[:, None, :] - mus[None, :, :]) ** 2).sum(-1)


def gemm_sq_dists(x, mus):
    """Squared distances ``|x|^2 + |mu|^2 - 2 x.mu`` clamped at 0, as ``torch.cdist(...) ** 2`` in the official
    code (for large sets: the benchmark)."""
    return np.maximum((x * x).sum(1)[:, None] + (mus * mus).sum(1)[None, :] - 2 * x @ mus.T, 0.0)


def _pairwise_lls(d, log_sigmas, dim):
    return -0.5 * d / np.exp(log_sigmas) - (dim / 2) * log_sigmas - (dim / 2) * np.log(2 * np.pi)


def mog_fit(mus, x_shuffled, *, lr=0.5, num_epochs=50, batch_size=10000, sq_dists=_sq_dists):
    """MoG.fit on ``x`` already in its shuffled order; the gradient by hand (the log-sum-exp's softmax) and
    torch.optim.Adam's update written out (betas 0.9, 0.999, eps 1e-8)."""
    k, dim = mus.shape
    d_all = sq_dists(x_shuffled, mus)
    mean_x = x_shuffled.mean(0)
    s = np.log((d_all.min(0) + 1e-3) / dim)
    s0 = 0.0
    params = [s, np.array(s0)]
    m1 = [np.zeros_like(s), np.zeros(())]
    m2 = [np.zeros_like(s), np.zeros(())]
    step, losses = 0, []
    for epoch in range(num_epochs):
        epoch_losses = []
        for b0 in range(0, len(x_shuffled), batch_size):
            s, s0 = params[0], float(params[1])
            d = d_all[b0 : b0 + batch_size]
            od = 0.81 * ((x_shuffled[b0 : b0 + batch_size] - mean_x) ** 2).sum(1)
            a = _pairwise_lls(d, s[None, :], dim) - np.log(k)
            o = _pairwise_lls(od, s0, dim)
            full = np.concatenate([a, o[:, None]], 1)
            lse = _logsumexp(full, 1)
            r = np.exp(full - lse[:, None])
            bsz = len(d)
            da = 0.5 * d / np.exp(s)[None, :] - dim / 2
            do = 0.5 * od / np.exp(s0) - dim / 2
            grads = [-(r[:, :-1] * da).sum(0) / (bsz * dim), np.array(-(r[:, -1] * do).sum() / (bsz * dim))]
            epoch_losses.append(-lse.mean() / dim)
            step += 1
            for p in range(2):
                m1[p] = 0.9 * m1[p] + 0.1 * grads[p]
                m2[p] = 0.999 * m2[p] + 0.001 * grads[p] ** 2
                mhat = m1[p] / (1 - 0.9**step)
                vhat = m2[p] / (1 - 0.999**step)
                params[p] = params[p] - lr * mhat / (np.sqrt(vhat) + 1e-8)
            params[0] = np.clip(params[0], -40, 40)
        mean_loss = sum(epoch_losses) / len(epoch_losses)
        losses.append(mean_loss)
        if epoch > 5 and max(abs(mean_loss - losses[-j]) for j in range(1, 6)) < 5e-4:
            break
    return params[0]


def mog_nll(mus, log_sigmas, x, sq_dists=_sq_dists):
    """get_dim_adjusted_nlls(x).mean(): ``-logsumexp_j(log N(x|mu_j, sigma_j) - log K) / D`` averaged."""
    k, dim = mus.shape
    a = _pairwise_lls(sq_dists(x, mus), log_sigmas[None, :], dim) - np.log(k)
    return float((-_logsumexp(a, 1) / dim).mean())


def fld(
    train, test, gen, *, fit_order, baseline_perm, baseline_order, num_epochs=50, batch_size=10000, sq_dists=_sq_dists
):
    """FLD.compute_metric for eval_feat "test", "train" and "gap" from one fit: normalise by the test mean and
    unbiased std, MoG at gen fitted to train (in ``fit_order``), baseline MoG at ``train[baseline_perm[:split]]``
    fitted to the rest (in ``baseline_order``). Returns a dict of the scores and NLLs."""
    train, test, gen = (np.asarray(a, np.float64) for a in (train, test, gen))
    mean, std = test.mean(0), test.std(0, ddof=1)
    train, test, gen = ((a - mean) / std for a in (train, test, gen))
    fit = dict(num_epochs=num_epochs, batch_size=batch_size, sq_dists=sq_dists)
    s = mog_fit(gen, train[np.asarray(fit_order)], **fit)
    nll_train, nll_test = mog_nll(gen, s, train, sq_dists), mog_nll(gen, s, test, sq_dists)
    split = min(len(gen), len(train) // 2)
    perm = np.asarray(baseline_perm)
    centres, rest = train[perm[:split]], train[perm[split:]]
    sb = mog_fit(centres, rest[np.asarray(baseline_order)], **fit)
    base = mog_nll(centres, sb, test, sq_dists)
    return {
        "fld": 100 * (nll_test - base),
        "fld_train": 100 * (nll_train - base),
        "fld_gap": 100 * (nll_train - nll_test),
        "fld_nll_test": nll_test,
        "fld_nll_train": nll_train,
        "fld_nll_baseline": base,
    }


# --------------------------------------------------------------------------------------------------
# Nearest training neighbour and AuthPct: layer6ai-labs/dgm-eval, dgm_eval/metrics/authpct.py
# --------------------------------------------------------------------------------------------------


def nearest_real(real, fake):
    """Index of the nearest real sample (lowest index on ties), the distance, that sample's NND_1 (diagonal
    masked), the ratio (0 for a copy) and authpct's ``real_min < gen_min`` test."""
    real, fake = np.asarray(real, np.float64), np.asarray(fake, np.float64)
    d = np.sqrt(((fake[:, None, :] - real[None, :, :]) ** 2).sum(-1))
    idx = d.argmin(1)
    dist = d[np.arange(len(fake)), idx]
    rr = np.sqrt(((real[:, None, :] - real[None, :, :]) ** 2).sum(-1))
    np.fill_diagonal(rr, np.inf)
    radius = rr.min(1)[idx]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(dist == 0, 0.0, dist / radius)
    return idx, dist, radius, ratio, radius < dist
