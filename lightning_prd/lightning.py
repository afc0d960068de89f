"""``PRDCallback`` and ``PRDEarlyStopping`` for the unified ``lightning`` package (``lightning.pytorch``).

The same implementations as :class:`lightning_prd.callback.PRDCallback` and
:class:`lightning_prd.callback.PRDEarlyStopping`, mixed with ``lightning.pytorch.Callback`` and
``lightning.pytorch.callbacks.EarlyStopping`` instead of ``pytorch_lightning``'s (a Trainer accepts only
callbacks of its own package). Importing this module raises ``ImportError`` when ``lightning``
is not installed.

Example:
    >>> from lightning_prd.lightning import PRDCallback  # doctest: +SKIP
    >>> import lightning.pytorch as L  # doctest: +SKIP
    >>> L.Trainer(callbacks=[PRDCallback(real)])  # doctest: +SKIP
"""

from __future__ import annotations

try:
    from lightning.pytorch import Callback as _Callback
    from lightning.pytorch.callbacks import EarlyStopping as _EarlyStopping
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError(
        "`lightning_prd.lightning` needs the `lightning` package (`pip install lightning`); "
        "with `pytorch_lightning` use `lightning_prd.callback.PRDCallback`"
    ) from err

from lightning_prd.callback import PRDCallback as _PLPRDCallback
from lightning_prd.callback import PRDCallbackCore, PRDEarlyStoppingCore
from lightning_prd.callback import PRDEarlyStopping as _PLPRDEarlyStopping


class PRDCallback(PRDCallbackCore, _Callback):
    __doc__ = _PLPRDCallback.__doc__


class PRDEarlyStopping(PRDEarlyStoppingCore, _EarlyStopping):
    __doc__ = _PLPRDEarlyStopping.__doc__


__all__ = ["PRDCallback", "PRDEarlyStopping"]
