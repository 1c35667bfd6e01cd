// A task taking a pooled sandbox: the provisioner with the real warm pool and
// the real credential broker; only QEMU is a double (pool-double.ts), since a
// unit test cannot run it. test/integration/warm-pool.test.ts does it for real.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EgressRule } from '../../../common/egress.js';
import { CredentialBroker, proxySocketPathFits } from '../../../main/credentials/broker.js';
import { MemorySecretStore } from '../../../main/credentials/keychain.js';
import { proxyGuestForward } from '../../../main/credentials/routes.js';
import { createFileLogger } from '../../../main/log/logger.js';
import { appPaths } from '../../../main/state/paths.js';
import { LiveSandboxes } from '../../../main/sandbox/live-sandboxes.js';
import { SandboxProvisioner } from '../../../main/tasks/sandbox-provisioner.js';
import type { SandboxExtension } from '../../../main/sandbox/sandbox-ports.js';
import type { WarmPoolDeps } from '../../../main/pool/warm-pool.js';
import { poolHarness, until, type PoolHarness } from './pool-double.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

/** The pool, a real broker and a provisioner sharing one driver double, as app.ts wires them. */
function setup(extra: SandboxExtension[] = [], more: Partial<WarmPoolDeps<unknown>> = {}): { h: PoolHarness; broker: CredentialBroker; provisioner: SandboxProvisioner; live: LiveSandboxes } {
  const live = new LiveSandboxes();
  const h = poolHarness({ warmPoolSize: 1 }, { runningMemoryMb: () => live.memoryMb(), guestForwards: (p) => [proxyGuestForward(p)], socketPathFits: proxySocketPathFits, ...more });
  const data = path.join(path.dirname(h.root), 'data');
  const paths = appPaths({ FACTORY_DATA_DIR: data, FACTORY_CACHE_DIR: path.join(data, 'cache') });
  const broker = new CredentialBroker({ paths, secrets: new MemorySecretStore() });
  const provisioner = new SandboxProvisioner({
    paths,
    settings: () => h.settings,
    images: { status: () => ({ state: 'ready', version: 'test' }), ensure: async () => ({}) },
    qemu: { checkInstalled: async () => ({ ok: true }), start: (o) => h.driver.start(o) },
    live,
    emit: () => {},
    extensions: [broker, ...extra],
    killLeftovers: async () => [],
    log: createFileLogger({ dir: path.join(data, 'logs') }),
    pool: h.pool,
  });
  cleanups.push(async () => {
    await h.pool.dispose();
    await broker.dispose();
    h.cleanup();
  });
  return { h, broker, provisioner, live };
}

/** What a guest connection through the proxy forward gets: the proxy's HTTP status, or the connect error's code. */
function askProxy(socketPath: string): Promise<number | string> {
  return new Promise((resolve) => {
    const req = http.request({ socketPath, method: 'GET', path: 'http://example.invalid/', headers: { host: 'example.invalid' } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    req.end();
  });
}

const task = (id: string) => ({ id, repoPath: '/nonexistent/repo', allowPush: false });

describe('a task taking a pooled sandbox', () => {
  it('gets the waiting VM, and its own proxy listens on the socket that VM was started with, only from the take', async () => {
    const { h, provisioner, live } = setup();
    await h.pool.start();
    await until('one waits', () => h.pool.size === 1);
    const pooledDir = h.driver.started[0]!.dir;
    const socketPath = path.join(pooledDir, 'proxy.sock');
    expect(h.driver.started[0]!.guestForwards).toEqual([proxyGuestForward(socketPath)]);
    // Before any task takes it, the guest's proxy forward reaches nothing.
    expect(await askProxy(socketPath)).toMatch(/ENOENT|ECONNREFUSED/);

    const sandbox = provisioner.open(task('task-a'));
    const vm = await provisioner.boot(sandbox, new AbortController().signal);
    expect(vm).toBe(h.driver.vms[0]);
    // Its boot time is the take's, not the pooled VM's own start (the double's says 20 s).
    expect(vm.bootMs).toBeLessThan(1000);
    expect(sandbox.sandboxDir).toBe(pooledDir);
    expect(sandbox.guestEnv.HTTPS_PROXY).toBe('http://10.0.2.100:80');
    expect(live.memoryMb()).toBe(1024);
    // Now task-a's proxy answers there (it refuses a destination it was not given, and says for whom).
    expect(await askProxy(socketPath)).toBe(403);
    // The pool refilled, in another folder; the first VM is not the pool's any more.
    await until('the refill waits', () => h.pool.size === 1);
    expect(h.driver.started[1]!.dir).not.toBe(pooledDir);
    expect(h.pool.take('task-b', { memoryMb: 1024, cpus: 2 })?.vm).toBe(h.driver.vms[1]);

    await provisioner.teardown(sandbox);
    expect(h.driver.vms[0]!.destroyed).toBe(true);
    expect(await askProxy(socketPath)).toMatch(/ENOENT|ECONNREFUSED/);
    expect(live.memoryMb()).toBe(0);
  });

  it('two tasks booting at once never get the same VM', async () => {
    const { h, provisioner } = setup();
    await h.pool.start();
    await until('one waits', () => h.pool.size === 1);
    h.driver.auto = false; // the refill and the second task's own start wait
    const a = provisioner.open(task('task-a'));
    const b = provisioner.open(task('task-b'));
    const bootA = provisioner.boot(a, new AbortController().signal);
    const bootB = provisioner.boot(b, new AbortController().signal);
    await until('the other task starts its own VM', () => h.driver.pending.length >= 1);
    h.driver.auto = true;
    while (h.driver.pending.length) h.driver.release();
    const [vmA, vmB] = await Promise.all([bootA, bootB]);
    expect(vmA).not.toBe(vmB);
    expect(a.sandboxDir).not.toBe(b.sandboxDir);
    expect([vmA, vmB]).toContain(h.driver.vms[0]);
    await provisioner.teardown(a);
    await provisioner.teardown(b);
  });

  it('a task on an environment layer starts its own VM and leaves the pool alone', async () => {
    const { h, provisioner } = setup();
    await h.pool.start();
    await until('one waits', () => h.pool.size === 1);
    const layerDisk = path.join(h.root, '..', 'layer.qcow2');
    fs.writeFileSync(layerDisk, 'layer');
    const sandbox = provisioner.open(task('task-a'));
    const vm = await provisioner.boot(sandbox, new AbortController().signal, { backingDisk: layerDisk });
    expect(vm).not.toBe(h.driver.vms[0]);
    expect(h.pool.size).toBe(1);
    expect(sandbox.sandboxDir).toBe(provisioner.sandboxDir('task-a'));
    await provisioner.teardown(sandbox);
  });

  it('drops the pooled VM when the extensions now give other forwards, and starts one with theirs', async () => {
    const extra: SandboxExtension = {
      name: 'extra-forward',
      prepare: async () => ({ guestForwards: [{ guestAddress: '10.0.2.101', guestPort: 80, command: 'socat - TCP:127.0.0.1:9' }] }),
      release: async () => {},
    };
    const { h, provisioner } = setup([extra]);
    await h.pool.start();
    await until('one waits', () => h.pool.size === 1);
    const sandbox = provisioner.open(task('task-a'));
    const vm = await provisioner.boot(sandbox, new AbortController().signal);
    expect(h.driver.vms[0]!.destroyed).toBe(true);
    expect(vm).not.toBe(h.driver.vms[0]);
    const own = h.driver.started.find((s) => s.dir === sandbox.sandboxDir && s.guestForwards?.length === 2);
    expect(own?.guestForwards?.[1]).toMatchObject({ guestAddress: '10.0.2.101' });
    await provisioner.teardown(sandbox);
  });

  it('stops the pooled VM when preparing the task fails (a bad egress rule), leaving nothing running', async () => {
    const { h, provisioner } = setup();
    await h.pool.start();
    await until('one waits', () => h.pool.size === 1);
    const sandbox = provisioner.open(task('task-a'));
    const bad = [{ host: 'exa mple.com' }] as unknown as EgressRule[];
    await expect(provisioner.boot(sandbox, new AbortController().signal, { egress: bad })).rejects.toThrow();
    expect(h.driver.vms[0]!.destroyed).toBe(true);
    expect(sandbox.vm).toBeUndefined();
  });
});

describe("a pooled guest's connection", () => {
  const CERT_ENV = { SSL_CERT_FILE: '/etc/ssl/certs/host-bundle.pem' };

  it('is opened while the VM waits, with the host certificates written then, and handed to the task once', async () => {
    const warmed: unknown[] = [];
    const { h, provisioner } = setup([], { warmGuest: async (ssh) => (warmed.push(ssh), CERT_ENV) });
    await h.pool.start();
    await until('one waits', () => h.pool.size === 1);
    const vm = h.driver.vms[0]!;
    expect(vm.connections).toHaveLength(1);
    expect(warmed).toEqual([vm.connections[0]]);
    const sandbox = provisioner.open(task('task-a'));
    await provisioner.boot(sandbox, new AbortController().signal);
    const ssh = await provisioner.connect(sandbox);
    // The same connection, no new handshake; the certificates' env without writing them again.
    expect(ssh).toBe(vm.connections[0]);
    expect(vm.connections).toHaveLength(1);
    expect(sandbox.guestEnv).toMatchObject(CERT_ENV);
    // Written once, while it waited (the refill's guest is another VM).
    expect(warmed.filter((c) => vm.connections.includes(c as never))).toHaveLength(1);
    // A second connect is a new connection: the pool's is handed over only once.
    h.settings.guestTrustsHostCertificates = false; // the double's guest cannot take the certificates written again
    await provisioner.connect(sandbox);
    expect(vm.connections).toHaveLength(2);
    await provisioner.teardown(sandbox);
  });

  it('is replaced when it closed while the VM waited', async () => {
    const { h, provisioner } = setup([], { warmGuest: async () => CERT_ENV });
    await h.pool.start();
    await until('one waits', () => h.pool.size === 1);
    const vm = h.driver.vms[0]!;
    vm.connections[0]!.close();
    const sandbox = provisioner.open(task('task-a'));
    await provisioner.boot(sandbox, new AbortController().signal);
    // (The double's guest cannot take the certificates the provisioner would write on a new connection.)
    h.settings.guestTrustsHostCertificates = false;
    expect(await provisioner.connect(sandbox)).toBe(vm.connections[1]);
    await provisioner.teardown(sandbox);
  });

  it('a waiting guest that trusts the host certificates is replaced when the setting is turned off', async () => {
    const { h } = setup([], { warmGuest: async () => CERT_ENV });
    await h.pool.start();
    await until('one waits', () => h.pool.size === 1);
    h.settings.guestTrustsHostCertificates = false;
    h.pool.poke();
    await until('a guest without them waits', () => h.driver.vms[0]!.destroyed && h.pool.size === 1);
    expect(h.driver.vms[0]!.connections[0]!.isClosed).toBe(true);
    expect(h.pool.take('task-a', { memoryMb: 1024, cpus: 2 })?.guest?.certificates).toBeUndefined();
  });
});

describe('the broker listening on a given socket path', () => {
  it('refuses a path QEMU, socat or a unix socket cannot carry, naming it, and listens nowhere', async () => {
    const { broker, h } = setup();
    const dir = path.join(h.root, 'x');
    for (const bad of ['relative/proxy.sock', `${dir}/a,b.sock`, `${dir}/a:b.sock`, `${dir}/a b.sock`, `${dir}/../../escape.sock`, `${dir}/a\nb.sock`, `/${'a'.repeat(120)}.sock`]) {
      await expect(broker.prepare({ taskId: 'task-bad', sandboxDir: dir, socketPath: bad })).rejects.toMatchObject({ name: 'InvalidPath', message: expect.stringContaining(JSON.stringify(bad)) });
    }
    expect(fs.existsSync(path.join(dir, 'proxy.sock'))).toBe(false);
    await expect(broker.api()['audit.list']({ sandboxId: 'task-bad' })).resolves.toEqual([]);
  });

  it('listens exactly on the given path, replacing whatever file was planted there', async () => {
    const { broker, h } = setup();
    const dir = path.join(h.root, 'given');
    fs.mkdirSync(dir);
    const socketPath = path.join(dir, 'other.sock');
    fs.writeFileSync(socketPath, 'planted');
    const prepared = await broker.prepare({ taskId: 'task-c', sandboxDir: dir, socketPath });
    expect(prepared.guestForwards).toEqual([proxyGuestForward(socketPath)]);
    expect(fs.statSync(socketPath).isSocket()).toBe(true);
    expect(fs.existsSync(path.join(dir, 'proxy.sock'))).toBe(false);
    await new Promise<void>((resolve, reject) => net.connect(socketPath).once('connect', function (this: net.Socket) { this.destroy(); resolve(); }).once('error', reject));
    await broker.release({ taskId: 'task-c' });
  });
});
