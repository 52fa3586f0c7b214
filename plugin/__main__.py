"""Serve gpucell's components to the Pulumi engine as the component package ``gpucell`` (see PulumiPlugin.yaml)."""

from gpucell.package.component_package import main

if __name__ == "__main__":
    main()
