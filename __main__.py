"""Pulumi entry point: `pulumi up -s <stack>` builds one regional cell per region in the stack config."""

from gpucell.stacks.program import main

main()
