"""The fingerprint in TensorBoard's *HParams* tab and in a ``TensorBoardLogger``'s ``hparams.yaml``.

TensorBoard's HParams tab shows one *session* per run: the hyperparameters and the metrics of the run's
**first** session summary (``_hparams_/experiment``, ``_hparams_/session_start_info``; TensorBoard keeps the
first summary metadata of a tag). ``TensorBoardLogger`` writes such a session when it logs hyperparameters
with metrics, and with ``default_hp_metric=True`` (its default) it does so at the start of every fit, with
the module's hyperparameters and a placeholder ``hp_metric`` of -1, long before the fingerprint is known;
with ``default_hp_metric=False`` it writes none. Either way a session written with the fingerprint later
would not be shown. So, per ``TensorBoardLogger`` of a fit:

* :func:`hold_session`, in the callback's ``setup``: the logger writes no placeholder session (its
  ``default_hp_metric`` is off during the fit);
* :func:`write_session`, at the first evaluation: the run's session, with the logger's hyperparameters (the
  module's, flattened with ``/``) and the fingerprint's fields ``Pfingerprint/<field>``, the scores as metrics
  and ``hp_metric`` where the logger had ``default_hp_metric``;
* :func:`release_session`, in the callback's ``teardown``: ``default_hp_metric`` back as it was; a fit that
  wrote no session (nothing evaluated) gets the logger's own placeholder session then.

``hparams.yaml`` is written by the logger once, when its folder first exists (before the fingerprint);
:func:`rewrite_hparams_file` writes it again with the logger's hyperparameters.
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Dict, Iterable, Mapping, MutableMapping

import numpy as np

#: per logger held: ``{"hp_metric": its default_hp_metric, "written": whether a session was written}``
_HELD: MutableMapping[Any, Dict[str, bool]] = weakref.WeakKeyDictionary()
#: the logger's attribute that switches its placeholder session
_SWITCH = "_default_hp_metric"


def hold_session(logger: Any) -> None:
    """Keep ``logger`` (a ``TensorBoardLogger``) from writing its placeholder session in this fit."""
    if not hasattr(logger, _SWITCH) or logger in _HELD:
        return
    _HELD[logger] = {"hp_metric": bool(getattr(logger, _SWITCH)), "written": False}
    setattr(logger, _SWITCH, False)


def release_session(logger: Any) -> None:
    """``default_hp_metric`` of ``logger`` back as it was; with it on and no session written, the logger's own."""
    held = _HELD.pop(logger, None)
    if held is None:
        return
    setattr(logger, _SWITCH, held["hp_metric"])
    if held["hp_metric"] and not held["written"]:
        logger.log_hyperparams(dict(getattr(logger, "hparams", None) or {}))


def session_values(params: Mapping[str, Any], parent: str = "") -> Dict[str, Any]:
    """``params`` flat (nested mappings joined with ``/``), each value a bool, int, float or string (others as
    their ``str``), as the HParams tab takes them.

    Example:
        >>> session_values({"lr": 0.1, "prd/fingerprint": {"k_precision_recall": 3, "protocol": None}})
        {'lr': 0.1, 'prd/fingerprint/k_precision_recall': 3, 'prd/fingerprint/protocol': 'None'}
    """
    out: Dict[str, Any] = {}
    for key, value in params.items():
        name = f"{parent}{key}"
        if isinstance(value, Mapping):
            out.update(session_values(value, name + "/"))
        elif isinstance(value, np.generic):
            out[name] = value.item()
        elif isinstance(value, (bool, int, float, str)):
            out[name] = value
        else:
            out[name] = str(value)
    return out


def write_session(logger: Any, metric_tags: Iterable[str], step: int) -> None:
    """Write the run's HParams session at ``step``: the logger's hyperparameters, ``metric_tags`` as metrics
    (and ``hp_metric`` where the logger had ``default_hp_metric``). Once per logger of a held fit."""
    from torch.utils.tensorboard.summary import hparams

    held = _HELD.get(logger)
    if held is not None:
        if held["written"]:
            return
        held["written"] = True
    with_hp_metric = held["hp_metric"] if held is not None else bool(getattr(logger, _SWITCH, False))
    tags = list(dict.fromkeys([*metric_tags, *(["hp_metric"] if with_hp_metric else [])]))
    values = session_values(dict(getattr(logger, "hparams", None) or {}))
    writer = logger.experiment._get_file_writer()
    for summary in hparams(values, dict.fromkeys(tags, 0.0)):
        writer.add_summary(summary, step)


def rewrite_hparams_file(logger: Any) -> None:
    """Write ``<log_dir>/hparams.yaml`` of ``logger`` again, with its hyperparameters as they are now."""
    from pytorch_lightning.core.saving import save_hparams_to_yaml

    log_dir = getattr(logger, "log_dir", None)
    name = getattr(logger, "NAME_HPARAMS_FILE", "hparams.yaml")
    if isinstance(log_dir, str) and os.path.isdir(log_dir):
        save_hparams_to_yaml(os.path.join(log_dir, name), getattr(logger, "hparams", None) or {})
