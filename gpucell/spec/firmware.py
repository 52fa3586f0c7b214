"""A VM's firmware and security devices: EFI (with Secure Boot and persistent NVRAM) and a virtual TPM.

Rendered as KubeVirt v1.9.0 has them (``api/openapi-spec/swagger.json``: ``v1.EFI``, ``v1.TPMDevice``,
``v1.FeatureState``): ``domain.firmware.bootloader.efi`` ``{secureBoot, persistent}``, ``domain.features.smm`` with
Secure Boot (KubeVirt refuses Secure Boot without SMM: "SecureBoot requires SMM, which is currently disabled",
``pkg/virt-api/webhooks/validating-webhook/admitters/vmi-create-admitter.go``), ``domain.devices.tpm``
``{persistent}``. Persistent NVRAM and TPM state live in a PVC KubeVirt creates per VM ("backend storage", user guide
``docs/compute/persistent_tpm_and_uefi_state.md``), of the class ``kubevirt.vmStateStorageClass`` names.
"""

from __future__ import annotations

from gpucell.spec._base import SpecModel

__all__ = ["EfiSpec", "TpmSpec"]


class EfiSpec(SpecModel):
    """Boot with EFI (OVMF) instead of BIOS."""

    secure_boot: bool = True
    """Secure Boot (KubeVirt's default for EFI); gpucell turns SMM on with it, which Secure Boot needs. Defaults to
    true."""
    persistent: bool = False
    """Keep the EFI variables (NVRAM: boot entries, enrolled Secure Boot keys) across restarts, in the VM's backend
    storage PVC. Defaults to false."""


class TpmSpec(SpecModel):
    """A virtual TPM 2.0 (swtpm; the host needs no TPM): Windows 11 installs need one, BitLocker and LUKS with
    TPM unlock need it persistent."""

    persistent: bool = False
    """Keep the TPM's state across restarts, in the VM's backend storage PVC (KubeVirt then uses the ``tpm-crb``
    model). Defaults to false."""
