"""export/pods.py: the Kubernetes replay pods' sizing, spread and securityContext."""

from __future__ import annotations

from fastgen.export.pods import container_security, pod_security, replay_resources, sized_resources, spread


def test_sized_resources_is_a_core_a_process_and_memory_growing_with_the_dataset():
    assert sized_resources(4, 0) == (5, 4)  # 1 + 0.5 x 5 = 3.5, rounded up
    assert sized_resources(4, 3 * 2**30) == (5, 16)  # + 4 x 3 GiB
    assert sized_resources(0, 1) == (1, 2)  # a byte of data still rounds up


def test_replay_resources_are_requests_equal_to_limits_and_options_replace_the_sizing():
    assert replay_resources(None, None, (5, 4)) == {
        "requests": {"cpu": "5", "memory": "4Gi"},
        "limits": {"cpu": "5", "memory": "4Gi"},
    }
    assert replay_resources(2.5, 12, (5, 4))["limits"] == {"cpu": "2.5", "memory": "12Gi"}


def test_the_restricted_profiles_rules_and_the_spread_over_hostnames():
    container, pod = container_security(), pod_security()
    assert container["allowPrivilegeEscalation"] is False and container["capabilities"] == {"drop": ["ALL"]}
    assert container["runAsNonRoot"] is True and container["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0 and pod["fsGroup"] == pod["runAsUser"]
    (constraint,) = spread({"a": "b"})
    assert constraint["topologyKey"] == "kubernetes.io/hostname" and constraint["maxSkew"] == 1
    assert constraint["labelSelector"] == {"matchLabels": {"a": "b"}}
    assert constraint["nodeTaintsPolicy"] == "Honor"  # else a tainted node holds the skew's minimum at 0 and pods pend
