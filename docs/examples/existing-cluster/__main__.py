"""`pulumi up`: the GPU platform and tenant `ml` on the cluster the stack's `kubeconfig` secret reaches."""

import pulumi

from gpu_stack import deploy

config = pulumi.Config()
stack = deploy(config.require_secret("kubeconfig"), config.require("kubernetesVersion"))
pulumi.export("mlNamespace", stack.tenant.namespace)
pulumi.export("trainVm", stack.vm.vm_name)
