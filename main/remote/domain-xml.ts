// The libvirt domain of a remote sandbox, as a pure function so it can be
// checked without a host. It keeps what the local QEMU command line guarantees
// (main/vm/qemu-args.ts): direct kernel boot with the image's command line,
// the per-sandbox keys through fw_cfg (opt/factory/*), a user-mode network
// with restrict=on whose only ways out are SSH forwarded on the host's
// 127.0.0.1 and the guest forwards (libvirt's interface types cannot say
// restrict=on or guestfwd, so that netdev is passed through as QEMU
// arguments), no host folder shared, no display, serial console to a file.
// Every value is validated, and escaped where it lands in XML.
import { guestKernelCmdline, TCG_CACHE_MB, userNetdev, type GuestForward } from '../vm/qemu-args.js';

export interface DomainSpec {
  /** libvirt domain name, also the QEMU guest name. */
  name: string;
  /** 'kvm' where the host has it (the point of a remote host), else 'qemu' (TCG). */
  virtType: 'kvm' | 'qemu';
  memoryMb: number;
  cpus: number;
  kernel: string;
  initrd: string;
  cmdline: string;
  overlay: string;
  serialLog: string;
  /** Port on the host's 127.0.0.1 forwarded to the guest's sshd. */
  sshPort: number;
  guestForwards: GuestForward[];
  fwCfg: Array<{ name: string; file: string }>;
}

export const DOMAIN_NAME = /^fiab-[a-z0-9][a-z0-9-]{0,62}$/;
/** Paths on the host: absolute, plain characters only (they reach XML, QEMU options and commands). */
const HOST_PATH = /^\/[A-Za-z0-9._/+-]{1,4000}$/;

export function checkHostPath(what: string, p: string): string {
  if (!HOST_PATH.test(p) || p.split('/').some((part) => part === '..')) {
    throw new Error(`${what} ${JSON.stringify(p)} is not a plain absolute path (letters, digits, . _ / + - only, no ..)`);
  }
  return p;
}

export function escapeXml(value: string): string {
  // Characters XML 1.0 cannot carry at all are refused, not dropped.
  if (/[\0-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]/.test(value)) throw new Error('a value for the domain XML holds a control character');
  return value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&apos;');
}

/** The oldest libvirt whose domain can say what a TCG sandbox needs (`<cpu mode='maximum'>`, 7.1; `<tcg><tb-cache>`, 6.9). */
export const TCG_MIN_LIBVIRT = [7, 1] as const;

/** What `virsh version` says of the daemon, checked against TCG_MIN_LIBVIRT: a problem to show, or undefined. */
export function libvirtTooOldToEmulate(virshVersion: string): string | undefined {
  const m = /Running against daemon: ([0-9]+)\.([0-9]+)/.exec(virshVersion);
  if (!m) return undefined;
  const [major, minor] = [Number(m[1]), Number(m[2])];
  const [needMajor, needMinor] = TCG_MIN_LIBVIRT;
  if (major > needMajor || (major === needMajor && minor >= needMinor)) return undefined;
  return `libvirt ${major}.${minor} on the host cannot give an emulated sandbox the CPU its agents need: without KVM it takes libvirt ${needMajor}.${needMinor} or later`;
}

export function domainXml(spec: DomainSpec): string {
  if (!DOMAIN_NAME.test(spec.name)) throw new Error(`bad domain name ${JSON.stringify(spec.name)}`);
  if (spec.virtType !== 'kvm' && spec.virtType !== 'qemu') throw new Error(`bad domain type ${JSON.stringify(spec.virtType)}`);
  for (const [what, n, max] of [['memory', spec.memoryMb, 1 << 20], ['cpus', spec.cpus, 256], ['SSH port', spec.sshPort, 65535]] as const) {
    if (!Number.isInteger(n) || n < 1 || n > max) throw new Error(`bad ${what} ${n}`);
  }
  for (const [what, p] of [['kernel', spec.kernel], ['initrd', spec.initrd], ['overlay', spec.overlay], ['serial log', spec.serialLog]] as const) checkHostPath(what, p);
  if (/[\0-\x1f]/.test(spec.cmdline)) throw new Error('the kernel command line holds a control character');
  const x = escapeXml;
  const netdev = userNetdev('fnet0', spec.sshPort, spec.guestForwards);
  const fwCfg = spec.fwCfg.map((f) => {
    if (!/^[a-z0-9_.-]+$/.test(f.name)) throw new Error(`bad fw_cfg name ${JSON.stringify(f.name)}`);
    return `    <entry name='opt/factory/${f.name}' file='${x(checkHostPath('fw_cfg file', f.file))}'/>`;
  });
  const arg = (v: string) => `    <qemu:arg value='${x(v)}'/>`;
  return [
    `<domain type='${spec.virtType}' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>`,
    `  <name>${x(spec.name)}</name>`,
    `  <memory unit='MiB'>${spec.memoryMb}</memory>`,
    `  <vcpu>${spec.cpus}</vcpu>`,
    '  <os>',
    "    <type arch='x86_64' machine='pc'>hvm</type>",
    `    <kernel>${x(spec.kernel)}</kernel>`,
    `    <initrd>${x(spec.initrd)}</initrd>`,
    `    <cmdline>${x(guestKernelCmdline(spec.cmdline, spec.virtType === 'qemu'))}</cmdline>`,
    '  </os>',
    // The guest finds fw_cfg through ACPI. Under TCG the translation cache is capped as locally (QEMU's default is 1 GiB).
    spec.virtType === 'kvm' ? '  <features><acpi/></features>' : `  <features><acpi/><tcg><tb-cache unit='MiB'>${TCG_CACHE_MB}</tb-cache></tcg></features>`,
    // Under TCG libvirt's default is qemu64, without the AVX2 the agent binaries need (as -cpu max locally).
    spec.virtType === 'kvm' ? "  <cpu mode='host-passthrough'/>" : "  <cpu mode='maximum' migratable='off'/>",
    "  <sysinfo type='fwcfg'>",
    ...fwCfg,
    '  </sysinfo>',
    '  <on_poweroff>destroy</on_poweroff>',
    '  <on_reboot>destroy</on_reboot>',
    '  <on_crash>destroy</on_crash>',
    '  <devices>',
    "    <disk type='file' device='disk'>",
    "      <driver name='qemu' type='qcow2' discard='unmap'/>",
    `      <source file='${x(spec.overlay)}'/>`,
    "      <target dev='vda' bus='virtio'/>",
    '    </disk>',
    "    <serial type='file'>",
    `      <source path='${x(spec.serialLog)}'/>`,
    "      <target port='0'/>",
    '    </serial>',
    "    <rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>",
    "    <memballoon model='none'/>",
    "    <controller type='usb' model='none'/>",
    '  </devices>',
    '  <qemu:commandline>',
    arg('-netdev'),
    arg(netdev),
    arg('-device'),
    // A fixed slot: libvirt places its own devices from slot 2 on.
    arg('virtio-net-pci,netdev=fnet0,bus=pci.0,addr=0x1f'),
    '  </qemu:commandline>',
    '</domain>',
    '',
  ].join('\n');
}
