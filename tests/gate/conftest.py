"""The gate's modules at the unit level, on the trusted world of the attack catalogue."""

from tests.adversarial.conftest import proven as proven  # noqa: PLC0414 (re-exported fixtures)
from tests.adversarial.conftest import sealed as sealed  # noqa: PLC0414
from tests.adversarial.conftest import world as world  # noqa: PLC0414
