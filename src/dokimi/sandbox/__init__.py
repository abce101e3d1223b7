"""Containers: the build image, one container run, what each container mounts, the
isolation probe, and the harness's version inside an image.

- :mod:`.docker`: the docker CLI as named questions (docker_ok, require_docker, image_exists,
  remove_container);
- :mod:`.image`: build_image / use_image (tag ``dokimi/<id>:<sha>`` or a context digest);
- :mod:`.container`: ContainerSpec, run_container (the fixed options, the timeout that leaves nothing behind);
- :mod:`.specs`: agent_spec and grade_spec (mounts, HOME, image.env, caches, git overrides), substitute;
- :mod:`.probe`: isolation_probe;
- :mod:`.harness_version`: harness_version_in_image (the profile's version command in a container).
"""

from __future__ import annotations

from dokimi.sandbox.container import (
    ContainerResult,
    ContainerSpec,
    Mount,
    container_identity,
    container_name,
    container_user,
    give_to_container_user,
    run_container,
)
from dokimi.sandbox.docker import (
    DockerStatus,
    container_exists,
    container_names,
    docker_ok,
    docker_status,
    image_exists,
    remove_batch_containers,
    remove_container,
    require_docker,
)
from dokimi.sandbox.image import BUILD_TIMEOUT_S, BuiltImage, build_image, use_image
from dokimi.sandbox.probe import ProbeResult, isolation_probe
from dokimi.sandbox.specs import (
    CacheMount,
    agent_spec,
    docker_network,
    fresh_grade_home,
    grade_spec,
    resolve_caches,
    substitute,
)

__all__ = [
    "BUILD_TIMEOUT_S",
    "BuiltImage",
    "CacheMount",
    "ContainerResult",
    "ContainerSpec",
    "DockerStatus",
    "Mount",
    "ProbeResult",
    "agent_spec",
    "build_image",
    "container_exists",
    "container_identity",
    "container_name",
    "container_names",
    "container_user",
    "docker_network",
    "docker_ok",
    "docker_status",
    "fresh_grade_home",
    "give_to_container_user",
    "grade_spec",
    "image_exists",
    "isolation_probe",
    "remove_batch_containers",
    "remove_container",
    "require_docker",
    "resolve_caches",
    "run_container",
    "substitute",
    "use_image",
]
