"""analysis/step_time.py: the service model's speeds."""

from __future__ import annotations

import pytest

from fastgen.errors import SpecError


@pytest.mark.parametrize("speeds", [(0.0, 50.0), (20000.0, -1.0), (float("nan"), 50.0)])
def test_a_service_model_refuses_a_speed_that_is_not_positive(speeds):
    from fastgen.analysis.schedule import ServiceModel

    with pytest.raises(SpecError, match="must be a positive number"):
        ServiceModel(*speeds)
