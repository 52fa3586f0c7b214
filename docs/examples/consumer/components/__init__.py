"""This project's own components: a package named `components`, beside gpucell's `gpucell` package."""
