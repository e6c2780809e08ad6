"""What every dynik_ros lifecycle node shares: declared and validated parameters, QoS profiles, the
transition plumbing, diagnostics helpers and a ``main()`` helper.

A node lists its parameters as :class:`ParamSpec` rows. Each is declared with a ``ParameterDescriptor``
(description, numeric range, choices). Bad values never crash the constructor: an override that rclpy
refuses (out of range, wrong type) is remembered and ``configure`` fails with an error naming the
parameter. ``on_configure`` re-validates every value; runtime changes go through the same checks.
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    ParameterType,
    SetParametersResult,
)
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

# Sensor streams: best-effort, keep-last, small depth. A best-effort subscription also matches reliable
# publishers, so subscribers use it too.
SENSOR_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=10,
    reliability=ReliabilityPolicy.BEST_EFFORT,
    durability=DurabilityPolicy.VOLATILE,
)
# Outputs others consume with default (reliable) subscriptions: robot_state_publisher, RViz, controllers.
RELIABLE_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=10,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)
COMMAND_QOS = RELIABLE_QOS


def reliable_qos(depth: int) -> QoSProfile:
    """:data:`RELIABLE_QOS` with ``depth`` samples of history; 0 keeps them all, for an offline run whose
    readers in other processes must get every sample however far behind they fall (a reader process
    descheduled for more than ``depth`` samples loses the oldest with KEEP_LAST)."""
    if depth <= 0:
        return QoSProfile(
            history=HistoryPolicy.KEEP_ALL,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.VOLATILE,
        )
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE,
    )


SUCCESS = TransitionCallbackReturn.SUCCESS
FAILURE = TransitionCallbackReturn.FAILURE

_TYPES = {
    bool: ParameterType.PARAMETER_BOOL,
    int: ParameterType.PARAMETER_INTEGER,
    float: ParameterType.PARAMETER_DOUBLE,
    str: ParameterType.PARAMETER_STRING,
}


class ConfigError(ValueError):
    """A configuration problem attributable to one parameter."""

    def __init__(self, parameter: str, message: str):
        super().__init__(f"parameter '{parameter}': {message}")
        self.parameter = parameter


@dataclass(frozen=True)
class ParamSpec:
    """One declared parameter. ``default`` fixes the type (bool, int, float, str, list of str or float).

    ``low``/``high`` give the inclusive numeric range (per element for float lists), ``choices`` the
    accepted strings, ``length`` the exact length of a list, ``runtime`` whether a change applies while
    the node is configured (otherwise it applies at the next ``configure``).
    """

    name: str
    default: Any
    description: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] | None = None
    length: int | None = None
    runtime: bool = False

    @property
    def kind(self) -> type:
        if isinstance(self.default, list):
            return list
        return type(self.default)

    @property
    def is_string_list(self) -> bool:
        return self.kind is list and (not self.default or isinstance(self.default[0], str))

    def descriptor(self) -> ParameterDescriptor:
        text = self.description
        if self.choices:
            text += f" One of: {', '.join(repr(c) for c in self.choices)}."
        desc = ParameterDescriptor(description=text)
        if self.is_string_list:
            # An empty list default would be typed BYTE_ARRAY by rclpy; keep the type open instead.
            desc.dynamic_typing = True
        elif self.kind in _TYPES:
            desc.type = _TYPES[self.kind]
        if self.choices:
            desc.additional_constraints = f"one of {list(self.choices)}"
        if self.kind is float and self.low is not None and self.high is not None:
            desc.floating_point_range = [
                FloatingPointRange(from_value=self.low, to_value=self.high, step=0.0)
            ]
        elif self.kind is int and self.low is not None and self.high is not None:
            desc.integer_range = [IntegerRange(from_value=int(self.low), to_value=int(self.high), step=1)]
        elif self.kind is list and self.low is not None:
            desc.additional_constraints = f"each element in [{self.low}, {self.high}]"
        return desc

    def coerce(self, value: Any) -> Any:
        """``value`` converted to this parameter's type where that is lossless (int -> float)."""
        if self.kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if self.kind is list and not self.is_string_list and isinstance(value, (list, tuple)):
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
                return [float(v) for v in value]
        if self.kind is list and isinstance(value, (list, tuple, bytes)) and len(value) == 0:
            return []
        if self.kind is list and not isinstance(value, list) and hasattr(value, "tolist"):
            return self.coerce(value.tolist())  # array.array from rclpy
        return value

    def check(self, value: Any) -> str | None:
        """``None`` if ``value`` is acceptable, else the reason."""
        value = self.coerce(value)
        kind = self.kind
        if kind is bool:
            return None if isinstance(value, bool) else f"expected a bool, got {value!r}"
        if kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                return f"expected an integer, got {value!r}"
            return self._check_range(value)
        if kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return f"expected a number, got {value!r}"
            if not math.isfinite(value):
                return f"must be finite, got {value}"
            return self._check_range(value)
        if kind is str:
            if not isinstance(value, str):
                return f"expected a string, got {value!r}"
            if self.choices is not None and value not in self.choices:
                return f"'{value}' is not one of {list(self.choices)}"
            return None
        if not isinstance(value, list):
            return f"expected a list, got {value!r}"
        if self.length is not None and len(value) != self.length:
            return f"expected {self.length} values, got {len(value)}"
        if self.is_string_list:
            if not all(isinstance(v, str) and v for v in value):
                return f"expected non-empty strings, got {value!r}"
            return None
        if not all(isinstance(v, float) and math.isfinite(v) for v in value):
            return f"expected finite numbers, got {value!r}"
        for v in value:
            reason = self._check_range(v)
            if reason:
                return reason
        return None

    def _check_range(self, value: float) -> str | None:
        if self.low is not None and value < self.low:
            return f"{value} is below the minimum {self.low}"
        if self.high is not None and value > self.high:
            return f"{value} is above the maximum {self.high}"
        return None


class DynikLifecycleNode(LifecycleNode):
    """Lifecycle node base: subclasses set ``PARAMS`` and implement the ``_configure`` / ``_activate`` /
    ``_deactivate`` / ``_release`` hooks; this class does declaration, validation and error reporting.

    ``last_error`` holds the reason of the last failed transition. ``trace`` is an optional hook
    ``(event, source stamp in ns)`` the in-process runner and the benchmark use to time messages.
    """

    PARAMS: tuple[ParamSpec, ...] = ()

    def __init__(self, node_name: str, **kwargs: Any):
        super().__init__(node_name, **kwargs)
        self.last_error: str | None = None
        self.active = False
        self.configured = False
        self.params: dict[str, Any] = {}
        self.trace: Callable[[str, int], None] | None = None
        self._specs = {spec.name: spec for spec in self.PARAMS}
        self._declare_errors: dict[str, str] = {}
        for spec in self.PARAMS:
            self._declare(spec)
        self.add_on_set_parameters_callback(self._on_set_parameters)

    # ----------------------------------------------------------------- parameters
    def _declare(self, spec: ParamSpec) -> None:
        try:
            self.declare_parameter(spec.name, spec.default, spec.descriptor())
            return
        except (InvalidParameterValueException, InvalidParameterTypeException) as exc:
            error = str(exc)
        self.declare_parameter(spec.name, spec.default, spec.descriptor(), ignore_override=True)
        override = getattr(self, "_parameter_overrides", {}).get(spec.name)
        if override is not None:
            value = spec.coerce(override.value)
            if spec.check(value) is None:
                result = self.set_parameters([Parameter(spec.name, value=value)])[0]
                if result.successful:
                    return
            reason = spec.check(value)
            error = f"rejected override {override.value!r}: {reason or error}"
        self._declare_errors[spec.name] = error

    def read_parameters(self) -> dict[str, Any]:
        """Every declared parameter, validated; :class:`ConfigError` naming the first bad one. Frame
        names (parameters ending in ``_frame`` or ``frame_id``) must not be empty, except ``base_frame``
        of ik_node whose empty value means the model's root link."""
        for name, error in self._declare_errors.items():
            raise ConfigError(name, error)
        values = {}
        for spec in self.PARAMS:
            value = spec.coerce(self.get_parameter(spec.name).value)
            reason = spec.check(value)
            if reason:
                raise ConfigError(spec.name, reason)
            if spec.name.endswith(("_frame", "frame_id")) and spec.default and not value:
                raise ConfigError(spec.name, "must not be empty")
            values[spec.name] = value
        return values

    def _on_set_parameters(self, parameters: list[Parameter]) -> SetParametersResult:
        runtime = []
        for param in parameters:
            spec = self._specs.get(param.name)
            if spec is None:
                continue
            reason = spec.check(param.value)
            if reason:
                return SetParametersResult(successful=False, reason=f"parameter '{param.name}': {reason}")
            if spec.runtime and self.configured:
                runtime.append((param.name, spec.coerce(param.value)))
            elif self.configured:
                self.get_logger().info(f"parameter '{param.name}' changed: applies at the next configure")
        if runtime:
            try:
                self._apply_runtime(dict(runtime))
            except ValueError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
            self.params.update(runtime)
        for param in parameters:
            self._declare_errors.pop(param.name, None)
        return SetParametersResult(successful=True)

    def _apply_runtime(self, changes: dict[str, Any]) -> None:
        """Apply runtime-changeable parameters while configured (raise ValueError to refuse)."""

    # ----------------------------------------------------------------- transitions
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.last_error = None
        try:
            self.params = self.read_parameters()
            self._configure(self.params)
        except ConfigError as exc:
            return self._fail("configure", str(exc))
        except Exception as exc:  # a model that does not load, a missing file, ...
            self.get_logger().debug(traceback.format_exc())
            return self._fail("configure", f"{type(exc).__name__}: {exc}")
        self.configured = True
        self.get_logger().info("configured")
        return super().on_configure(state)

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        result = super().on_activate(state)  # enables the lifecycle publishers
        if result != SUCCESS:
            return result
        try:
            self._activate()
        except Exception as exc:
            super().on_deactivate(state)
            return self._fail("activate", f"{type(exc).__name__}: {exc}")
        self.active = True
        self.get_logger().info("active")
        return SUCCESS

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.active = False
        try:
            self._deactivate()
        except Exception as exc:
            self.get_logger().error(f"deactivate: {type(exc).__name__}: {exc}")
        self.get_logger().info("inactive")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release_all()
        self.get_logger().info("cleaned up")
        return super().on_cleanup(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self.active:
            self.active = False
            try:
                self._deactivate()
            except Exception as exc:
                self.get_logger().error(f"shutdown: {type(exc).__name__}: {exc}")
        self._release_all()
        self.get_logger().info("shut down")
        return super().on_shutdown(state)

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.active = False
        self._release_all()
        return super().on_error(state)

    def _fail(self, transition: str, reason: str) -> TransitionCallbackReturn:
        self.last_error = reason
        self.get_logger().error(f"{transition} failed: {reason}")
        self._release_all()
        return FAILURE

    def _release_all(self) -> None:
        self.active = False
        self.configured = False
        try:
            self._release()
        except Exception as exc:
            self.get_logger().error(f"release: {type(exc).__name__}: {exc}")

    # hooks
    def _configure(self, params: dict[str, Any]) -> None:
        """Load models, create publishers, subscriptions and timers; raise ConfigError on bad values."""

    def _activate(self) -> None:
        """Start producing output."""

    def _deactivate(self) -> None:
        """Stop producing output."""

    def _release(self) -> None:
        """Destroy what ``_configure`` created (must tolerate a partial configure)."""

    # ----------------------------------------------------------------- helpers
    @property
    def lifecycle_state(self) -> str:
        """Label of the current lifecycle state ('unconfigured', 'inactive', 'active', 'finalized')."""
        return str(self._state_machine.current_state[1])

    def destroy_entities(self, entities: Iterable[Any]) -> None:
        """Destroy publishers, subscriptions, services and timers created by ``_configure`` (``None``
        skipped)."""
        for entity in entities:
            if entity is None:
                continue
            if hasattr(entity, "cancel"):  # timer
                entity.cancel()
                self.destroy_timer(entity)
            elif hasattr(entity, "publish"):
                if hasattr(self, "destroy_lifecycle_publisher"):
                    self.destroy_lifecycle_publisher(entity)
                else:
                    self.destroy_publisher(entity)
            elif hasattr(entity, "srv_type"):  # service
                self.destroy_service(entity)
            else:
                self.destroy_subscription(entity)

    def emit(self, event: str, stamp: int) -> None:
        if self.trace is not None:
            self.trace(event, stamp)


class RejectionCounter:
    """Counts of refused inputs by reason, with a throttled warning naming the last detail."""

    def __init__(self, reasons: Sequence[str]):
        self.counts = {reason: 0 for reason in reasons}
        self.last_detail = ""

    def add(self, reason: str, detail: str) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1
        self.last_detail = f"{reason}: {detail}"

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def percentiles_ms(samples: Sequence[float]) -> dict[str, float]:
    """p50 / p99 / max of durations in seconds, in milliseconds (NaN when empty)."""
    if not len(samples):
        return {"p50": float("nan"), "p99": float("nan"), "max": float("nan")}
    arr = np.asarray(samples, dtype=float) * 1e3
    return {
        "p50": float(np.percentile(arr, 50)),
        "p99": float(np.percentile(arr, 99)),
        "max": float(arr.max()),
    }


def diagnostic_status(
    name: str, hardware_id: str, level: Any, message: str, values: dict[str, Any]
) -> DiagnosticStatus:
    """A ``DiagnosticStatus`` with ``values`` as key/value strings (floats with 6 significant digits);
    ``level`` is one of ``DiagnosticStatus.OK / WARN / ERROR / STALE``."""
    status = DiagnosticStatus(name=name, hardware_id=hardware_id, message=message, level=level)
    status.values = [
        KeyValue(key=k, value=(f"{v:.6g}" if isinstance(v, float) else str(v))) for k, v in values.items()
    ]
    return status


def wall_time() -> float:
    """Monotonic wall time in seconds for latency and staleness measurements."""
    return time.perf_counter()
