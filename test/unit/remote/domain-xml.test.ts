// @vitest-environment jsdom
// The remote sandbox's libvirt domain, built as a pure function: what it
// guarantees (restrict=on network, SSH on the host's 127.0.0.1 only, fw_cfg
// keys, direct kernel boot, no shared folder) and what it refuses (values
// from settings or a task that would inject XML or QEMU options).
import { describe, expect, it } from 'vitest';
import { checkHostPath, domainXml, escapeXml, libvirtTooOldToEmulate, type DomainSpec } from '../../../main/remote/domain-xml.js';
import { TCG_CACHE_MB } from '../../../main/vm/qemu-args.js';

const spec = (patch: Partial<DomainSpec> = {}): DomainSpec => ({
  name: 'fiab-abc123',
  virtType: 'qemu',
  memoryMb: 1024,
  cpus: 2,
  kernel: '/srv/fiab/images/aa/vmlinuz',
  initrd: '/srv/fiab/images/aa/initrd.img',
  cmdline: 'root=/dev/vda rw console=ttyS0 init=/sbin/factory-init',
  overlay: '/srv/fiab/sandboxes/fiab-abc123/overlay.qcow2',
  serialLog: '/srv/fiab/sandboxes/fiab-abc123/serial.log',
  sshPort: 40022,
  guestForwards: [{ guestAddress: '10.0.2.100', guestPort: 80, command: 'socat - UNIX-CONNECT:/srv/fiab/sandboxes/fiab-abc123/proxy-0.sock' }],
  fwCfg: [{ name: 'authorized_keys', file: '/srv/fiab/sandboxes/fiab-abc123/authorized_keys' }],
  ...patch,
});

describe('the remote sandbox domain', () => {
  it('keeps the local guarantees: restrict=on, SSH on 127.0.0.1 only, guestfwd, fw_cfg keys, direct kernel boot', () => {
    const xml = domainXml(spec());
    const doc = new DOMParser().parseFromString(xml, 'application/xml');
    expect(doc.getElementsByTagName('parsererror')).toHaveLength(0);
    const args = [...doc.getElementsByTagName('qemu:arg')].map((a) => a.getAttribute('value') ?? '');
    const netdev = args[args.indexOf('-netdev') + 1]!;
    expect(netdev.split(',')).toEqual(expect.arrayContaining(['user', 'restrict=on', 'hostfwd=tcp:127.0.0.1:40022-:22']));
    expect(netdev).toContain('guestfwd=tcp:10.0.2.100:80-cmd:socat - UNIX-CONNECT:/srv/fiab/sandboxes/fiab-abc123/proxy-0.sock');
    expect(xml).toContain("<entry name='opt/factory/authorized_keys' file='/srv/fiab/sandboxes/fiab-abc123/authorized_keys'/>");
    expect(xml).toContain('<kernel>/srv/fiab/images/aa/vmlinuz</kernel>');
    expect(xml).not.toMatch(/<filesystem|<interface|<graphics/);
  });

  it('gives the guest a CPU the agent binaries run on: the host’s under KVM, all that emulation offers under TCG', () => {
    const cpuOf = (virtType: DomainSpec['virtType']) => new DOMParser().parseFromString(domainXml(spec({ virtType })), 'application/xml').getElementsByTagName('cpu')[0];
    expect(cpuOf('kvm')?.getAttribute('mode')).toBe('host-passthrough');
    // Not libvirt's TCG default (qemu64): no AVX2 or SSE4.2, and the Claude Code binary dies on an illegal instruction.
    expect(cpuOf('qemu')?.getAttribute('mode')).toBe('maximum');
  });

  it('boots an emulated guest at fixed addresses, as a local one, and leaves a KVM guest’s command line alone', () => {
    const cmdlineOf = (virtType: DomainSpec['virtType']) => new DOMParser().parseFromString(domainXml(spec({ virtType })), 'application/xml').getElementsByTagName('cmdline')[0]?.textContent;
    expect(cmdlineOf('qemu')).toBe('root=/dev/vda rw console=ttyS0 init=/sbin/factory-init norandmaps');
    expect(cmdlineOf('kvm')).toBe('root=/dev/vda rw console=ttyS0 init=/sbin/factory-init');
  });

  it('names a libvirt too old to describe an emulated sandbox, from what virsh version --daemon says', () => {
    const said = (daemon: string) => `Compiled against library: libvirt 9.0.0\nUsing library: libvirt 9.0.0\nUsing API: QEMU 9.0.0\nRunning hypervisor: QEMU 7.2.0\nRunning against daemon: ${daemon}\n`;
    expect(libvirtTooOldToEmulate(said('7.0.0'))).toMatch(/^libvirt 7\.0 on the host .* libvirt 7\.1 or later$/);
    expect(libvirtTooOldToEmulate(said('6.10.0'))).toMatch(/libvirt 6\.10 /);
    expect(libvirtTooOldToEmulate(said('7.1.0'))).toBeUndefined();
    expect(libvirtTooOldToEmulate(said('10.0.0'))).toBeUndefined();
    // Nothing said of the daemon: nothing to judge (the check names a libvirt that does not answer elsewhere).
    expect(libvirtTooOldToEmulate('Running hypervisor: QEMU 7.2.0\n')).toBeUndefined();
  });

  it('caps the translation cache under TCG as a local sandbox does, and says nothing of TCG under KVM', () => {
    const tbCache = (virtType: DomainSpec['virtType']) => new DOMParser().parseFromString(domainXml(spec({ virtType })), 'application/xml').querySelector('features > tcg > tb-cache');
    expect(tbCache('qemu')?.textContent).toBe(String(TCG_CACHE_MB));
    expect(tbCache('qemu')?.getAttribute('unit')).toBe('MiB');
    expect(tbCache('kvm')).toBeNull();
  });

  it('escapes XML in the kernel command line instead of letting it close the element', () => {
    const xml = domainXml(spec({ cmdline: "quiet</cmdline></os><devices><filesystem type='mount'><source dir='/'/></filesystem></devices><os><cmdline>" }));
    const doc = new DOMParser().parseFromString(xml, 'application/xml');
    expect(doc.getElementsByTagName('filesystem')).toHaveLength(0);
    expect(doc.getElementsByTagName('cmdline')[0]?.textContent).toContain('</cmdline></os><devices><filesystem');
  });

  it('refuses a domain name that would inject XML, and names outside fiab-*', () => {
    expect(() => domainXml(spec({ name: "fiab-x</name><devices><filesystem/></devices><name>y" }))).toThrow(/bad domain name/);
    expect(() => domainXml(spec({ name: 'someone-elses-vm' }))).toThrow(/bad domain name/);
  });

  it('refuses paths with quotes, spaces, commas or .. (they reach XML attributes and QEMU options)', () => {
    expect(() => domainXml(spec({ overlay: "/srv/x'/><disk file='/etc/shadow" }))).toThrow(/overlay .* not a plain absolute path/);
    expect(() => domainXml(spec({ serialLog: '/srv/a,b.log' }))).toThrow(/serial log/);
    expect(() => domainXml(spec({ kernel: '/srv/../etc/passwd' }))).toThrow(/kernel/);
    expect(() => domainXml(spec({ fwCfg: [{ name: 'authorized_keys', file: 'relative/file' }] }))).toThrow(/fw_cfg file/);
    expect(() => checkHostPath('storage folder', '/srv/fiab store')).toThrow(/storage folder/);
  });

  it('refuses a guest forward that would add QEMU network options, or a fw_cfg name outside opt/factory', () => {
    expect(() => domainXml(spec({ guestForwards: [{ guestAddress: '10.0.2.2', guestPort: 80, command: 'socat - TCP:1.2.3.4:80' }] }))).toThrow(/gateway/);
    expect(() => domainXml(spec({ guestForwards: [{ guestAddress: '10.0.2.100', guestPort: 80, command: 'x\nhostfwd=tcp::22-:22' }] }))).toThrow(/one non-empty line/);
    // A comma in the command stays inside the option value (doubled), never a new option.
    const xml = domainXml(spec({ guestForwards: [{ guestAddress: '10.0.2.100', guestPort: 80, command: 'socat - UNIX-CONNECT:/s,hostfwd=tcp::2222-:22' }] }));
    expect(xml).toContain('UNIX-CONNECT:/s,,hostfwd=tcp::2222-:22');
    expect(() => domainXml(spec({ fwCfg: [{ name: '../etc', file: '/srv/a' }] }))).toThrow(/bad fw_cfg name/);
  });

  it('refuses control characters that XML cannot carry, and out-of-range sizes', () => {
    expect(() => escapeXml('a\x01b')).toThrow(/control character/);
    expect(() => domainXml(spec({ cmdline: 'quiet\nroot=/dev/sdb' }))).toThrow(/control character/);
    expect(() => domainXml(spec({ memoryMb: 0 }))).toThrow(/bad memory/);
    expect(() => domainXml(spec({ sshPort: 70000 }))).toThrow(/bad SSH port/);
    expect(() => domainXml(spec({ virtType: 'xen' as 'qemu' }))).toThrow(/bad domain type/);
  });
});
