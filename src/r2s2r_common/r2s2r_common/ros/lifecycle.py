"""The base of every lifecycle node here: parameters from a typed schema, and autostart.

A :class:`SchemaLifecycleNode` declares one ROS parameter per field of its schema in the
constructor (type, default, description, range; a value ROS rejects is recorded, not raised),
refuses runtime changes that would make the config invalid, and builds the typed config on
request (in ``on_configure``, so that bad values make configure fail with the reason). Its
:meth:`~SchemaLifecycleNode.autostart` configures and activates the node where no lifecycle
manager runs; :func:`r2s2r_common.ros.runner.run_lifecycle_node` calls it when the node's
``autostart`` parameter is true. Cleanup, shutdown and ``destroy_node`` call the node's
:meth:`~SchemaLifecycleNode.release` (free what configure made; safe to call twice).

A :class:`ComponentLifecycleNode` serves one :class:`LifecycleComponent` built at configure (a
simulated cell's server, a mirror): activate/deactivate start and stop it, cleanup closes it,
and its ``/diagnostics`` are published at a fixed rate while it exists.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

from diagnostic_msgs.msg import DiagnosticArray
from pydantic import BaseModel
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn

from r2s2r_common.config import ConfigError
from r2s2r_common.ros.params import (
    add_schema_validation,
    config_from_parameters,
    declare_schema_parameters,
)
from r2s2r_common.ros.qos import DEFAULT_QOS
from r2s2r_common.topics import DIAGNOSTICS

ConfigT = TypeVar("ConfigT", bound=BaseModel)


class SchemaLifecycleNode(LifecycleNode, Generic[ConfigT]):
    """A lifecycle node whose ROS parameters are the fields of a typed schema.

    Args:
        node_name: ROS node name.
        schema: The parameter schema (a pydantic model; nested models give dotted names).
        **kwargs: Passed to ``rclpy.lifecycle.Node`` (``context``, ``parameter_overrides``...).

    """

    def __init__(self, node_name: str, schema: type[ConfigT], **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.last_error = ""
        """Why the last transition failed (empty when it did not), for the runner's message."""
        self._schema = schema
        self._schema_parameters = declare_schema_parameters(self, schema)
        # Values take effect at the next configure; invalid ones are refused with the reason.
        add_schema_validation(self, self._schema_parameters)

    def config_from_parameters(self) -> ConfigT:
        """Build the typed config from the current parameter values.

        Raises:
            ConfigError: A value ROS rejected at declaration, or values the schema refuses.

        """
        try:
            return config_from_parameters(self, self._schema_parameters, self._schema)
        except ConfigError as error:
            self.last_error = str(error)  # the runner's autostart message names it
            raise

    def autostart(self) -> bool:
        """Configure and activate (no lifecycle manager needed); False if a transition failed.

        The failing transition has logged its reason; an exception escaping one is logged here
        (type and message) and kept in ``last_error``.
        """
        try:
            if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
                return False
            return bool(self.trigger_activate() == TransitionCallbackReturn.SUCCESS)
        except ConfigError:
            raise  # the runner's one-line boundary: "invalid configuration", exit 2
        except Exception as error:
            self.last_error = f"{type(error).__name__}: {error}"
            self.get_logger().error(f"autostart: {self.last_error}")
            return False

    def release(self) -> None:
        """Free what configure made (publishers, timers, devices); safe to call when unconfigured.

        Called by cleanup and shutdown; nodes that hold resources override it.
        """

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        """Free what configure made (:meth:`release`)."""
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        """Stop and free everything (:meth:`release`)."""
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def destroy_node(self) -> None:
        """Free what configure made (:meth:`release`), then destroy the node.

        Destroying a configured node without a cleanup or shutdown transition (the usual end
        of ``main`` and of a test) must not leave its resources to the garbage collector: a
        MuJoCo renderer collected on another thread than the one its EGL context is current on
        fails (``EGL_BAD_ACCESS``). Call this on the thread that spun the node.
        """
        self.release()
        super().destroy_node()


class LifecycleComponent(Protocol):
    """What a :class:`ComponentLifecycleNode` serves: built at configure, freed at cleanup."""

    def activate(self) -> None:
        """Start (timers, stepping, following)."""
        ...

    def deactivate(self) -> None:
        """Stop; the component keeps its state."""
        ...

    def close(self) -> None:
        """Free everything the component made."""
        ...

    def diagnostics(self) -> DiagnosticArray:
        """Return the component's current ``/diagnostics`` message (stamped)."""
        ...


ComponentT = TypeVar("ComponentT", bound=LifecycleComponent)


class ComponentLifecycleNode(SchemaLifecycleNode[ConfigT], Generic[ConfigT, ComponentT]):
    """A lifecycle node that serves one component and publishes its ``/diagnostics``.

    ``on_configure`` builds the component and hands it to :meth:`serve`; activate and
    deactivate start and stop it; cleanup and shutdown close it and the diagnostics.

    Args:
        node_name: ROS node name.
        schema: The parameter schema.
        **kwargs: Passed to ``rclpy.lifecycle.Node``.

    """

    def __init__(self, node_name: str, schema: type[ConfigT], **kwargs: Any) -> None:
        super().__init__(node_name, schema, **kwargs)
        self.component: ComponentT | None = None
        self._diagnostics_pub: Any = None
        self._diagnostics_timer: Any = None

    def serve(self, component: ComponentT, diagnostics_rate_hz: float) -> None:
        """Take ``component`` (end of a successful configure); publish its diagnostics."""
        self.component = component
        self._diagnostics_pub = self.create_publisher(DiagnosticArray, DIAGNOSTICS, DEFAULT_QOS)
        self._diagnostics_timer = self.create_timer(
            1.0 / diagnostics_rate_hz, self._publish_diagnostics
        )

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        """Activate the lifecycle publishers, then start the component."""
        result = super().on_activate(state)
        assert self.component is not None
        self.component.activate()
        return result

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        """Stop the component (it keeps its state), then the lifecycle publishers."""
        if self.component is not None:
            self.component.deactivate()
        return super().on_deactivate(state)

    def release(self) -> None:
        """Close the component and the diagnostics."""
        if self.component is not None:
            self.component.close()
            self.component = None
        if self._diagnostics_timer is not None:
            self.destroy_timer(self._diagnostics_timer)
            self._diagnostics_timer = None
        if self._diagnostics_pub is not None:
            self.destroy_publisher(self._diagnostics_pub)
            self._diagnostics_pub = None

    def _publish_diagnostics(self) -> None:
        component, publisher = self.component, self._diagnostics_pub
        if component is not None and publisher is not None:
            publisher.publish(component.diagnostics())
