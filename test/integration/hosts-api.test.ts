// Settings' sandbox host flow against a real host: libvirt on this machine
// reached only through an OpenSSH server on 127.0.0.1 (test/support/remote-host.ts).
// The user checks a draft, is shown the presented host key, confirms it, saves;
// logs in with their SSH agent; relies on their known_hosts; cannot remove a
// host while a sandbox runs there.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '../../common/domain.js';
import { stderrLogger } from '../../main/log/logger.js';
import { hostsApi } from '../../main/remote/hosts-api.js';
import { readUserKnownHosts } from '../../main/remote/known-hosts.js';
import { SandboxHosts } from '../../main/remote/sandbox-hosts.js';
import { SettingsStore } from '../../main/state/settings.js';
import { testImage } from '../support/image.js';
import { startRemoteHost, type RemoteHostRig } from '../support/remote-host.js';

let rig: RemoteHostRig;
let dir: string;
let settings: SettingsStore;
let hosts: SandboxHosts;
let agent: ChildProcess | undefined;
let knownHostsHome: string;
let tasks: Task[] = [];
let api: ReturnType<typeof hostsApi>;

const draft = () => ({ name: 'rig', destination: 'root@127.0.0.1', port: rig.port, keySource: 'file' as const, keyFile: rig.keyFile, capacity: 1, storageDir: rig.storageDir, virtType: 'qemu' as const });

beforeAll(async () => {
  rig = await startRemoteHost();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hosts-api-'));
  settings = new SettingsStore({ dir });
  hosts = new SandboxHosts({ settings: () => settings.get(), log: stderrLogger('hosts') });
  // The user's HOME for known_hosts: empty until a test writes one.
  knownHostsHome = path.join(dir, 'home');
  fs.mkdirSync(path.join(knownHostsHome, '.ssh'), { recursive: true });
  api = hostsApi({ settings, hosts, tasks: () => tasks, access: { knownHosts: () => readUserKnownHosts(knownHostsHome), agentSocket: () => path.join(dir, 'agent.sock') } });
});

afterAll(async () => {
  for (const h of settings?.get().sandboxHosts ?? []) await hosts.driver(h.name).reap().catch(() => undefined); // teardown: the test's own checks said what failed
  hosts?.close();
  if (agent?.pid) process.kill(agent.pid);
  await rig?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe('adding a sandbox host from Settings', () => {
  it('a first check shows the presented fingerprint and runs nothing on the unverified host', async () => {
    const r = await api['hosts.check'](draft());
    expect(r).toEqual({ fingerprint: rig.hostKeyFingerprint, hostKey: 'unverified' });
  });

  it('checked again with the confirmed key: libvirt, QEMU, which accelerator, the storage folder and its free disk', async () => {
    const r = await api['hosts.check']({ ...draft(), hostKeyFingerprint: rig.hostKeyFingerprint });
    expect(r.hostKey).toBe('pinned');
    expect(r.facts?.qemu).toMatch(/^\d+\.\d+/);
    expect(typeof r.facts?.kvm).toBe('boolean');
    expect(r.facts?.freeBytes).toBeGreaterThan(1024 ** 3);
    expect(r.facts?.problems).toEqual([]);
    expect((await rig.exec(`test -d ${rig.storageDir} && echo there`)).stdout).toBe('there\n');
  });

  it('a check that asks for KVM names its absence exactly when libvirt there offers none', async () => {
    const r = await api['hosts.check']({ ...draft(), virtType: 'kvm', hostKeyFingerprint: rig.hostKeyFingerprint });
    // Whether libvirt offers KVM here depends on the machine; the check must agree with itself either way.
    expect(r.facts!.problems.some((p) => /KVM is not available on the host/.test(p))).toBe(!r.facts!.kvm);
  });

  it('save is refused with a fingerprint other than the presented one, and pins the presented one', async () => {
    const wrong = `SHA256:${'B'.repeat(43)}`;
    const err = await api['hosts.save']({ ...draft(), hostKeyFingerprint: wrong }).catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'RemoteHostKeyChanged' });
    expect((err as Error).message).toContain(rig.hostKeyFingerprint);
    expect(settings.get().sandboxHosts).toEqual([]);

    const list = await api['hosts.save']({ ...draft(), hostKeyFingerprint: rig.hostKeyFingerprint });
    expect(list).toMatchObject([{ name: 'rig', hostKeyFingerprint: rig.hostKeyFingerprint, capacity: 1, running: 0 }]);
    expect(settings.get().sandboxHosts[0]?.hostKeyFingerprint).toBe(rig.hostKeyFingerprint);
    await hosts.connectAll();
    expect(await api['hosts.list']({})).toMatchObject([{ name: 'rig', connected: true, lost: false }]);
  });

  it('logs in with a key from the user\u2019s SSH agent (no key file)', async () => {
    const sock = path.join(dir, 'agent.sock');
    agent = spawn('ssh-agent', ['-D', '-a', sock], { stdio: 'ignore' });
    for (let i = 0; i < 100 && !fs.existsSync(sock); i++) await new Promise((r) => setTimeout(r, 50));
    const { keyFile: _, ...viaAgent } = { ...draft(), keySource: 'agent' as const };
    // An empty agent: the login fails, naming the host.
    const empty = await api['hosts.check']({ ...viaAgent, hostKeyFingerprint: rig.hostKeyFingerprint }).catch((e: Error) => e);
    expect(empty).toMatchObject({ name: 'RemoteHostUnreachable' });
    execFileSync('ssh-add', ['-q', rig.keyFile], { env: { ...process.env, SSH_AUTH_SOCK: sock }, stdio: 'ignore' });
    const r = await api['hosts.check']({ ...viaAgent, hostKeyFingerprint: rig.hostKeyFingerprint });
    expect(r.facts?.problems).toEqual([]);
  });

  it('a key the user\u2019s known_hosts lists (hashed) is verified; another key listed there is refused loudly', async () => {
    const file = path.join(knownHostsHome, '.ssh', 'known_hosts');
    fs.writeFileSync(file, `[127.0.0.1]:${rig.port} ${rig.hostPublicKey}\n`);
    execFileSync('ssh-keygen', ['-H', '-f', file], { stdio: 'ignore' });
    expect(fs.readFileSync(file, 'utf8')).not.toContain('127.0.0.1');
    const r = await api['hosts.check'](draft());
    expect(r.hostKey).toBe('known_hosts');
    expect(r.fingerprint).toBe(rig.hostKeyFingerprint);
    expect(r.facts?.problems).toEqual([]);

    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(dir, 'impostor')]);
    fs.writeFileSync(file, `[127.0.0.1]:${rig.port} ${fs.readFileSync(path.join(dir, 'impostor.pub'), 'utf8')}`);
    const err = await api['hosts.check'](draft()).catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'RemoteHostKeyChanged' });
    expect((err as Error).message).toMatch(/WARNING.*known_hosts/);
    fs.rmSync(file);
  });

  it('remove is refused while a sandbox runs there, naming the task, and allowed once it is gone', async () => {
    await hosts.place('task-remote-1', 'rig', { running: 0, capacity: 2 });
    const vm = await hosts.driverFor('task-remote-1')!.start({ sandboxDir: path.join(dir, 'sandboxes', 'hostrm1'), image: await testImage(), memoryMb: 512, cpus: 1 });
    // The record the task service keeps for that sandbox (tasks are not what is tested here).
    tasks = [{ id: 'task-remote-1', title: 'fix the parser', sandbox: { status: 'running', host: 'rig' } } as Task];
    try {
      const err = await api['hosts.remove']({ name: 'rig' }).catch((e: Error) => e);
      expect((err as Error).message).toMatch(/cannot remove sandbox host rig: 1 sandbox runs there: task-remote-1 \("fix the parser"\)/);
      expect(settings.get().sandboxHosts).toHaveLength(1);
    } finally {
      await vm.destroy();
      tasks = [];
    }
    expect(await api['hosts.remove']({ name: 'rig' })).toEqual([]);
    expect(settings.get().sandboxHosts).toEqual([]);
    // The app's connection to the removed host ends: no sshd session serves it any more.
    const listener = execFileSync('pgrep', ['-P', String(process.pid), '-f', path.join(path.dirname(rig.keyFile), 'sshd_config')], { encoding: 'utf8' }).trim();
    const sessions = () => execFileSync('sh', ['-c', `pgrep -P ${Number(listener)} || true`], { encoding: 'utf8' }).trim();
    for (let i = 0; i < 50 && sessions(); i++) await new Promise((r) => setTimeout(r, 100));
    expect(sessions()).toBe('');
  });
});
