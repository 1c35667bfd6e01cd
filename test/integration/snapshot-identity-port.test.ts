// The app's snapshot template restored by hand (real QEMU, the cached base
// image, the app's own command line): what anyone who copies the template and
// starts it meets. Its guest must serve no SSH at all until it is given an
// identity through the identity port, and then serve exactly the host key it
// was given, never the template's.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFile, mkdtemp, rm, stat } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeSshBanner } from '../../main/guest/guest-agent.js';
import { identityMessage } from '../../main/guest/identity-channel.js';
import { appPaths } from '../../main/state/paths.js';
import { generateSandboxKeys, publicKeyBlob } from '../../main/ssh/sandbox-keys.js';
import { AccelProbe } from '../../main/vm/accel-probe.js';
import type { BaseImage } from '../../main/vm/image-store.js';
import { buildQemuArgs, tcgThreads } from '../../main/vm/qemu-args.js';
import { freePort, QemuDriver } from '../../main/vm/qemu-driver.js';
import { QmpClient } from '../../main/vm/qmp-client.js';
import { readKeys, sandboxFiles } from '../../main/vm/sandbox-files.js';
import { templateRam } from '../../main/vm/snapshot-boot.js';
import { machineKey, templateKey } from '../../main/vm/warm-state.js';
import { testImage } from '../support/image.js';
import { presentedHostKey } from '../support/presented-host-key.js';

const MEMORY_MB = 1024;
const CPUS = 2;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const fingerprint = (blob: Buffer) => createHash('sha256').update(blob).digest('base64');

describe("the snapshot template's guest", () => {
  let image: BaseImage;
  let root: string;
  let template: string;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    image = await testImage();
    root = await mkdtemp(path.join(os.tmpdir(), 'identity-port-'));
    const driver = new QemuDriver({ snapshotsDir: appPaths().snapshots });
    expect(await driver.prepareFastBoot(image, { memoryMb: MEMORY_MB, cpus: CPUS })).toBe(true);
    const version = (await driver.checkInstalled()).version ?? '';
    const accel = await AccelProbe.cached();
    template = path.join(appPaths().snapshots, templateKey(machineKey({ accel, memoryMb: MEMORY_MB, cpus: CPUS, image, cmdline: image.manifest.kernelCmdline }, version, 'qemu-system-x86_64')));
    await stat(path.join(template, 'ready'));
  }, 600_000);
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('serves no SSH until given an identity, then only the host key it was given', async () => {
    const t = sandboxFiles(template);
    const templateKeys = await readKeys(t);
    const overlay = path.join(root, 'overlay.qcow2');
    await copyFile(t.overlay, overlay);
    const port = await freePort();
    const qmpSocket = path.join(root, 'qmp.sock');
    const identitySocket = path.join(root, 'identity.sock');
    const args = buildQemuArgs({
      name: 'identity-port-test',
      accel: await AccelProbe.cached(),
      tcgThreads: tcgThreads(CPUS),
      memoryMb: MEMORY_MB,
      memory: { kind: 'file', path: templateRam(template), shared: false },
      cpus: CPUS,
      kernel: image.kernel,
      initrd: image.initrd,
      cmdline: image.manifest.kernelCmdline,
      overlay,
      sshPort: port,
      guestForwards: [],
      serialLog: path.join(root, 'serial.log'),
      qmpSocket,
      identitySocket,
      pidFile: path.join(root, 'qemu.pid'),
      fwCfg: [
        { name: 'authorized_keys', file: t.authorizedKeys },
        { name: 'ssh_host_ed25519_key', file: t.hostKey },
      ],
    });
    const child = spawn('qemu-system-x86_64', [...args, '-incoming', 'defer'], { stdio: 'ignore' });
    children.push(child);
    let qmp: QmpClient | undefined;
    for (let i = 0; !qmp && i < 500 && child.exitCode === null; i++) {
      qmp = await QmpClient.connect(qmpSocket, { timeoutMs: 2000 }).catch(() => undefined);
      if (!qmp) await sleep(20);
    }
    expect(qmp, 'QMP never answered').toBeDefined();
    await qmp!.execute('migrate-set-capabilities', { capabilities: [{ capability: 'x-ignore-shared', state: true }] });
    await qmp!.execute('migrate-incoming', { uri: `exec:cat ${path.join(template, 'state')}` });
    while (((await qmp!.execute('query-status')) as { status: string }).status === 'inmigrate') await sleep(20);
    await qmp!.execute('cont');

    // Running, and asked for SSH for a while: no banner (the template's sshd waits for a host key).
    const until = Date.now() + 4000;
    while (Date.now() < until) {
      expect(await probeSshBanner(port, 500), 'the restored template answered SSH without an identity').toBe(false);
      await sleep(100);
    }

    // The identity, as the app writes it; the waiter answers once sshd listens with it.
    const clone = generateSandboxKeys('clone');
    const socket = await new Promise<net.Socket>((resolve, reject) => {
      const s = net.createConnection({ path: identitySocket }, () => resolve(s));
      s.once('error', reject);
    });
    let answer = '';
    socket.on('data', (c: Buffer) => (answer += c.toString('latin1')));
    socket.write(identityMessage(clone));
    for (let i = 0; i < 600 && !answer.includes('\n'); i++) await sleep(100);
    socket.destroy();
    expect(answer).toBe('ok\n');

    const presented = await presentedHostKey(port);
    expect(fingerprint(presented)).toBe(fingerprint(publicKeyBlob(clone.hostPublicKey)));
    expect(fingerprint(presented)).not.toBe(fingerprint(publicKeyBlob(templateKeys.hostPublicKey)));
    qmp!.close();
  }, 600_000);
});
