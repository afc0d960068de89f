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

A hyperparameter the tab cannot hold (an int beyond float64 such as ``10**400``, text that is no UTF-8, an object
whose text cannot be formed) is written as its text, or left out when that fails too, with one warning naming it;
a session that still cannot be written is skipped with a warning. Training never stops on a hyperparameter.

``hparams.yaml`` is written by the logger once, when its folder first exists (before the fingerprint);
:func:`rewrite_hparams_file` writes it again with the logger's hyperparameters.
"""

from __future__ import annotations

import os
import warnings
import weakref
from typing import Any, Dict, Iterable, List, Mapping, MutableMapping, Tuple

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
        try:
            logger.log_hyperparams(dict(getattr(logger, "hparams", None) or {}))
        except (OverflowError, TypeError, ValueError) as error:  # a hyperparameter the HParams tab cannot hold
            _warn_unwritten(error)


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
            out[name] = _text(value)
    return out


def _text(value: Any) -> Any:
    """``str(value)``, or ``value`` itself when it has no text (:func:`writable_values` then skips it)."""
    try:
        return str(value)
    except Exception:  # a __str__ that raises, an int past Python's digit limit
        return value


def writable_values(values: Mapping[str, Any]) -> Tuple[Dict[str, Any], List[str]]:
    """``values`` (from :func:`session_values`) that the HParams tab holds: each one as it is when TensorBoard's
    ``hparams`` takes it, else as its text, else left out; and a note per value written as text or left out.

    Example:
        >>> kept, notes = writable_values({"lr": 0.1, "big": 10**400})
        >>> kept["lr"], kept["big"] == "1" + "0" * 400, notes
        (0.1, True, ['`big` (int of 401 digits): written as text'])
    """
    kept: Dict[str, Any] = {}
    notes: List[str] = []
    for name, value in values.items():
        if _holds(name, value):
            kept[name] = value
        elif _holds(name, _text(value)):
            kept[name] = _text(value)
            notes.append(f"`{name}` ({_describe(value)}): written as text")
        else:
            notes.append(f"`{name}` ({_describe(value)}): left out")
    return kept, notes


def _holds(name: str, value: Any) -> bool:
    """TensorBoard's ``hparams`` takes ``value`` (a bool, int, float or str within float64 and UTF-8)."""
    from torch.utils.tensorboard.summary import hparams

    if not isinstance(value, (bool, int, float, str)):
        return False
    try:
        hparams({name: value}, {})
    except Exception:  # an int out of float64's range, text the protobuf refuses
        return False
    return True


def _describe(value: Any) -> str:
    """``value``'s type, with its number of digits for an int."""
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return f"int of {len(str(abs(value)))} digits"
        except ValueError:  # past Python's limit of digits written (4,300 by default)
            return "int of more digits than Python writes"
    return type(value).__name__


def _warn_unwritten(error: BaseException) -> None:
    warnings.warn(
        f"TensorBoard's HParams session was not written: {type(error).__name__}: {error}", UserWarning, stacklevel=3
    )


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
    values, notes = writable_values(session_values(dict(getattr(logger, "hparams", None) or {})))
    if notes:
        warnings.warn(
            f"TensorBoard's HParams tab cannot hold hyperparameter {'; '.join(notes)} (the others are written)",
            UserWarning,
            stacklevel=3,
        )
    try:
        summaries = hparams(values, dict.fromkeys(tags, 0.0))
    except (OverflowError, TypeError, ValueError) as error:
        _warn_unwritten(error)
        return
    writer = logger.experiment._get_file_writer()
    for summary in summaries:
        writer.add_summary(summary, step)


def rewrite_hparams_file(logger: Any) -> None:
    """Write ``<log_dir>/hparams.yaml`` of ``logger`` again, with its hyperparameters as they are now."""
    from pytorch_lightning.core.saving import save_hparams_to_yaml

    log_dir = getattr(logger, "log_dir", None)
    name = getattr(logger, "NAME_HPARAMS_FILE", "hparams.yaml")
    if isinstance(log_dir, str) and os.path.isdir(log_dir):
        save_hparams_to_yaml(os.path.join(log_dir, name), getattr(logger, "hparams", None) or {})
