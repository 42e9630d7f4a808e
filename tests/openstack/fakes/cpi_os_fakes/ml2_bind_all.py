"""ML2 mechanism driver that binds every port on any segment and marks it ACTIVE.

Stands in for an L2 agent (OVS/linuxbridge): no dataplane exists, so nothing is wired; a
port is "up" as soon as Nova (or anyone) sets binding:host_id on it.
"""
from neutron_lib import constants
from neutron_lib.api.definitions import portbindings
from neutron_lib.plugins.ml2 import api


class BindAllMechanismDriver(api.MechanismDriver):
    """Bind any port with vif_type ovs, on the first segment offered."""

    @property
    def connectivity(self):
        # l2: may also bind ports without fixed IPs.
        return portbindings.CONNECTIVITY_L2

    def initialize(self):
        pass

    def bind_port(self, context):
        for segment in context.segments_to_bind:
            context.set_binding(
                segment[api.ID],
                portbindings.VIF_TYPE_OVS,
                {portbindings.CAP_PORT_FILTER: True, 'ovs_hybrid_plug': False},
                status=constants.PORT_STATUS_ACTIVE)
            return
