"""phalanx's device plugin for ``nvidia.com/gpu`` (device plugin API v1beta1), served by the node agent.

:mod:`~nodeagent.deviceplugin.plugin` answers the kubelet (which GPUs, what the container needs),
:mod:`~nodeagent.deviceplugin.server` serves it on the kubelet's socket directory and keeps it
registered, :mod:`~nodeagent.deviceplugin.outcomes` reports every answer.
"""
