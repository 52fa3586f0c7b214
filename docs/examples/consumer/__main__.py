"""`pulumi up`: one gpucell region with this team's ML tenant."""

import pulumi

from components.platform import GpuPlatform, GpuPlatformArgs

config = pulumi.Config()
platform = GpuPlatform("fra1", GpuPlatformArgs(ssh_private_key=config.require_secret("sshPrivateKey")))
pulumi.export("apiServerUrl", platform.api_server_url)
pulumi.export("mlNamespace", platform.ml_namespace)
