import { describe, expect, it } from 'vitest';
import { buildQemuArgs, escapeOptionValue } from '../../../main/vm/qemu-args.js';
import { launchSpec } from './launch-spec.js';
import { overlayArgs } from '../../../main/vm/overlay.js';
import { qemuGuestName, qemuIdentityArgs, sandboxFiles } from '../../../main/vm/sandbox-files.js';

const base = launchSpec({ cmdline: 'root=/dev/vda console=ttyS0 net.ifnames=0', fwCfg: [{ name: 'authorized_keys', file: '/sb/keys/authorized_keys' }] });

function option(args: string[], flag: string): string[] {
  return args.flatMap((a, i) => (a === flag ? [args[i + 1]!] : []));
}

describe('QEMU command line', () => {
  it('restricts the user network and forwards SSH on 127.0.0.1 only', () => {
    const [netdev, ...more] = option(buildQemuArgs(base), '-netdev');
    expect(more).toEqual([]);
    const parts = netdev!.split(',');
    expect(parts).toContain('restrict=on');
    const hostfwd = parts.filter((p) => p.startsWith('hostfwd='));
    expect(hostfwd).toEqual(['hostfwd=tcp:127.0.0.1:40022-:22']);
  });

  it('writes guest forwards as per-connection commands, commas escaped', () => {
    const args = buildQemuArgs({
      ...base,
      guestForwards: [{ guestAddress: '10.0.2.100', guestPort: 8080, command: 'socat STDIO UNIX-CONNECT:/run/p.sock,retry=3' }],
    });
    const netdev = option(args, '-netdev')[0]!;
    expect(netdev).toContain(',guestfwd=tcp:10.0.2.100:8080-cmd:socat STDIO UNIX-CONNECT:/run/p.sock,,retry=3');
    expect(netdev).not.toMatch(/guestfwd=[^,]*-tcp:/);
  });

  it('refuses guest forwards outside the guest network, on QEMU addresses, or with a multi-line command', () => {
    const fwd = { guestAddress: '10.0.2.100', guestPort: 80, command: 'cat' };
    expect(() => buildQemuArgs({ ...base, guestForwards: [{ ...fwd, guestAddress: '127.0.0.1' }] })).toThrow(/guest network/);
    expect(() => buildQemuArgs({ ...base, guestForwards: [{ ...fwd, guestAddress: '10.0.2.2' }] })).toThrow(/gateway/);
    expect(() => buildQemuArgs({ ...base, guestForwards: [{ ...fwd, guestPort: 70000 }] })).toThrow(/port/);
    expect(() => buildQemuArgs({ ...base, guestForwards: [{ ...fwd, command: 'a\nb' }] })).toThrow(/one non-empty line/);
  });

  it('uses -cpu max under TCG and the probed CPU under KVM', () => {
    const tcg = buildQemuArgs(base);
    expect(option(tcg, '-cpu')).toEqual(['max']);
    expect(option(tcg, '-accel')[0]).toMatch(/^tcg/);
    const kvm = buildQemuArgs({ ...base, accel: { accel: 'kvm', cpu: 'host', reason: 'probe ran' } });
    expect(option(kvm, '-accel')).toEqual(['kvm']);
    expect(option(kvm, '-cpu')).toEqual(['host']);
  });

  it('boots a TCG guest without address randomisation (translated code is found by address), a KVM guest as the image says', () => {
    expect(option(buildQemuArgs(base), '-append')).toEqual(['root=/dev/vda console=ttyS0 net.ifnames=0 norandmaps']);
    expect(option(buildQemuArgs({ ...base, accel: { accel: 'kvm', cpu: 'host', reason: 'probe ran' } }), '-append')).toEqual(['root=/dev/vda console=ttyS0 net.ifnames=0']);
    // An image that already asks for it does not get it twice.
    expect(option(buildQemuArgs({ ...base, cmdline: 'norandmaps root=/dev/vda' }), '-append')).toEqual(['norandmaps root=/dev/vda']);
  });

  it('shares no host folder and has no display or default devices', () => {
    const args = buildQemuArgs(base);
    const joined = args.join(' ');
    expect(joined).not.toMatch(/virtfs|9p|virtiofs|vhost-user-fs|fsdev|-hda|smb=/i);
    expect(args).toContain('-nodefaults');
    expect(option(args, '-display')).toEqual(['none']);
    expect(option(args, '-drive')).toEqual(['file=/sb/overlay.qcow2,if=virtio,format=qcow2,discard=unmap']);
  });

  it('boots the kernel directly with serial to a file, QMP and the identity port on sockets, a pidfile and fw_cfg keys', () => {
    const args = buildQemuArgs(base);
    expect(option(args, '-kernel')).toEqual(['/img/vmlinuz']);
    expect(option(args, '-initrd')).toEqual(['/img/initrd.img']);
    expect(option(args, '-append')).toEqual([`${base.cmdline} norandmaps`]);
    expect(option(args, '-chardev')).toEqual([
      'file,id=serial0,path=/sb/serial.log',
      'socket,id=qmp0,path=/sb/qmp.sock,server=on,wait=off',
      'socket,id=identity0,path=/sb/identity.sock,server=on,wait=off',
    ]);
    expect(option(args, '-device')).toContain('virtserialport,bus=vser0.0,chardev=identity0,name=org.factory.identity');
    expect(option(args, '-mon')).toEqual(['chardev=qmp0,mode=control']);
    expect(option(args, '-pidfile')).toEqual(['/sb/qemu.pid']);
    expect(option(args, '-fw_cfg')).toEqual(['name=opt/factory/authorized_keys,file=/sb/keys/authorized_keys']);
  });

  it('starts with the sandbox folder\'s identity, so a crash cleanup can recognise its QEMU', () => {
    const dir = '/data/sandboxes/task 1,x';
    const args = buildQemuArgs({ ...base, name: qemuGuestName(dir), pidFile: sandboxFiles(dir).pidFile });
    expect(args.slice(0, 4)).toEqual(qemuIdentityArgs(dir));
    expect(args.slice(0, 4)).toEqual(['-name', 'factory-task_1_x', '-pidfile', '/data/sandboxes/task 1,x/qemu.pid']);
    expect(option(args, '-name')).toHaveLength(1);
    expect(option(args, '-pidfile')).toHaveLength(1);
  });

  it('refuses a guest name that would add QEMU options', () => {
    expect(() => buildQemuArgs({ ...base, name: 'x,process=evil' })).toThrow(/bad guest name/);
    expect(() => buildQemuArgs({ ...base, name: '' })).toThrow(/bad guest name/);
    expect(qemuGuestName('/sb/a,debug-threads=on')).toBe('factory-a_debug-threads_on');
  });

  it('escapes commas in paths so they cannot add options', () => {
    expect(escapeOptionValue('a,b')).toBe('a,,b');
    const args = buildQemuArgs({ ...base, overlay: '/x,readonly=off/overlay.qcow2' });
    expect(option(args, '-drive')[0]).toBe('file=/x,,readonly=off/overlay.qcow2,if=virtio,format=qcow2,discard=unmap');
  });

  it('creates overlays backed by the base as qcow2', () => {
    expect(overlayArgs('/img/disk.qcow2', '/sb/overlay.qcow2')).toEqual([
      'create', '-q', '-f', 'qcow2', '-b', '/img/disk.qcow2', '-F', 'qcow2', '/sb/overlay.qcow2',
    ]);
  });
});
