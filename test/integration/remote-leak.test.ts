// The leak check of a sandbox on a "remote" host (libvirt behind the OpenSSH
// stand-in of test/support/remote-host.ts), as a user runs it: a task on the
// host whose stage used the real key through the forwarded proxy is checked
// clean, with guest memory, overlay and serial log scanned on the host; the
// host's files never hold the key, not even the scanner's input. Then an
// attacker inside the sandbox holds the real key in memory and on disk (only
// possible in the test: the test itself hands the bytes in through
// tasks.exec), plain, UTF-16LE and base64, and the check finds each form in
// memory and on disk. A host that answers garbage gives an error, not a pass.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FactoryApp } from '../../main/app.js';
import { needlesFor } from '../../main/credentials/leak-needles.js';
import { remoteLeakScan } from '../../main/remote/remote-leak.js';
import { SshHost } from '../../main/remote/ssh-host.js';
import { testImage } from '../support/image.js';
import type { ModelStub } from '../support/model-stub.js';
import { startRemoteApp, type RemoteApp } from '../support/remote-app.js';
import { startRemoteHost, type RemoteHostRig } from '../support/remote-host.js';
import type { FixtureRepo } from '../support/repo.js';
import { waitForTask } from '../support/wait-for-task.js';

const KEY = `sk-ant-remote-${randomBytes(20).toString('hex')}`;

describe('the leak check of a sandbox on a remote host', () => {
  let rig: RemoteHostRig;
  let fx: RemoteApp | undefined;
  let app: FactoryApp | undefined;
  let stub: ModelStub;
  let repo: FixtureRepo;

  beforeAll(async () => {
    await testImage();
    rig = await startRemoteHost();
    fx = await startRemoteApp({
      rig,
      key: KEY,
      capacity: 2,
      sseDelayMs: 5,
      // Half the default guest: the check dumps and scans all of its memory three times here
      // (the remote leak bench measures a 1 GiB guest).
      settings: { vmMemoryMb: 512 },
      files: {
        'README.md': '# Fixture\n',
        '.factory/pipeline.json': JSON.stringify({
          stages: {
            request: {
              command:
                `curl -sS --fail-with-body -X POST "$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: $ANTHROPIC_API_KEY" ` +
                `-H 'content-type: application/json' -d '{"model":"claude-stub","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}' >/dev/null && echo asked`,
            },
          },
        }),
      },
    });
    ({ app, stub, repo } = fx);
  });

  afterAll(async () => {
    await fx?.dispose();
    await rig?.stop();
  });

  it('is clean after real use, finds a planted key in memory and on disk, and the host never holds the key', async () => {
    const created = await app!.api['tasks.create']({ repoPath: repo.dir, title: 'Leak check remotely', host: 'rig' });
    const t = await waitForTask(app!, created.id, (x) => ['review', 'failed', 'cancelled'].includes(x.phase));
    expect(t.error).toBeUndefined();
    expect(t.sandbox.host).toBe('rig');
    expect(stub.requests.some((r) => r.headers['x-api-key'] === KEY)).toBe(true);
    const dir = `${rig.storageDir}/sandboxes/fiab-${t.id}`;

    // Copy the scanner's input while the check runs (it is deleted after), to look for the key in it.
    let polling = true;
    const copied = (async () => {
      while (polling) {
        await rig.exec(`for f in ${dir}/leakscan-*.spec; do [ -f "$f" ] && cp "$f" ${rig.storageDir}/seen.spec; done; true`);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const clean = await app!.api['leakcheck.run']({ taskId: t.id });
    polling = false;
    await copied;
    expect(clean.verdict, JSON.stringify(clean.scanned)).toBe('clean');
    const remote = Object.fromEntries(clean.scanned.filter((s) => s.source.endsWith('(on rig)')).map((s) => [s.source, s]));
    expect(Object.keys(remote).sort()).toEqual(['disk overlay (on rig)', 'guest memory (on rig)', 'serial log (on rig)']);
    expect(remote['guest memory (on rig)']!.bytes).toBeGreaterThan(500 * 1024 * 1024); // the whole 512 MiB guest's dump
    expect(remote['disk overlay (on rig)']!.bytes).toBeGreaterThan(1024 * 1024);

    // The host's files: no key in any encoding the check looks for, in the storage folder (images, overlay,
    // serial log) nor in the scanner's input; and nothing of the check is left behind.
    const spec = (await rig.exec(`cat ${rig.storageDir}/seen.spec && rm -f ${rig.storageDir}/seen.spec`)).stdout;
    expect(spec).toMatch(/^fiab-leakscan-spec 1\n/);
    const needles = needlesFor('k', KEY);
    expect(spec.split('\n').filter((l) => l.startsWith('needle ')).length).toBe(needles.length);
    for (const n of needles) {
      for (let i = 0; i + 8 <= n.bytes.length; i += 4) expect(Buffer.from(spec, 'latin1').includes(n.bytes.subarray(i, i + 8)), n.encoding).toBe(false);
    }
    // One grep over everything the host stores for the app (the patterns travel as arguments, never as a file there).
    const plainForms = needles.filter((n) => !n.encoding.startsWith('utf16')).map((n) => `-e ${n.bytes.toString('latin1')}`);
    const grep = await rig.exec(`grep -r -a -l -F ${plainForms.join(' ')} ${rig.storageDir}; echo "exit $?"`);
    expect(grep.stdout.trim()).toBe('exit 1'); // grep: nothing found (2 would be an error)
    expect((await rig.exec(`ls -A ${dir}`)).stdout).not.toMatch(/memory-|leakscan-/);

    // An attacker in the sandbox holds the real key: in a process's memory (tmpfs and the environment of a
    // process that stays) and in a file on the disk, plain, UTF-16LE and base64.
    const blob = Buffer.concat([
      Buffer.from(`plain ${KEY}\n`),
      Buffer.from(KEY, 'utf16le'),
      Buffer.from(`\nb64 ${Buffer.from(`{"apiKey":"${KEY}"}`).toString('base64')}\n`),
    ]);
    const planted = await app!.api['tasks.exec']({
      taskId: t.id,
      argv: ['sh', '-c', 'set -e; cat > /dev/shm/.k; cp /dev/shm/.k "${HOME:-/work}/.cache-k"; sync; (K="$(cat /dev/shm/.k)" nohup sleep 3600 >/dev/null 2>&1 &); wc -c < "${HOME:-/work}/.cache-k"'],
      stdin: blob.toString('base64'),
    });
    expect(planted.exitCode, Buffer.from(planted.stderr, 'base64').toString()).toBe(0);
    expect(Number(Buffer.from(planted.stdout, 'base64').toString().trim())).toBe(blob.length);
    const leak = await app!.api['leakcheck.run']({ taskId: t.id });
    expect(leak.verdict).toBe('leak');
    const found = (source: string) => new Set(leak.hits.filter((h) => h.source === source).map((h) => h.encoding.replace(/@\d$/, '')));
    for (const source of ['memory', 'overlay']) {
      expect([...found(source)].sort(), source).toEqual(expect.arrayContaining(['base64', 'raw', 'utf16le']));
    }
    expect(JSON.stringify(leak)).not.toContain(KEY);

    // A host whose scanner answers garbage: an error naming it, never a pass (the host's answer is replaced
    // here on the way back; everything else is the real host).
    const conn = await SshHost.connect(rig.sshTarget());
    try {
      const liar = Object.create(conn) as SshHost;
      liar.run = async (argv, opts) => (argv[0] === 'perl' ? { code: 0, stdout: 'fiab-leakscan 1 x\nclean\n', stderr: '' } : conn.run(argv, opts));
      await expect(remoteLeakScan({ host: liar, dir, domain: `fiab-${t.id}` }, needlesFor('k', KEY))).rejects.toThrow(/malformed.*not taken as a pass/);
      // The dump it made was deleted all the same.
      expect((await rig.exec(`ls -A ${dir}`)).stdout).not.toMatch(/memory-|leakscan-/);
    } finally {
      conn.close();
    }

    await app!.api['tasks.cancel']({ taskId: t.id }).catch(() => undefined); // it may have ended already; the checks above are the test
    await app!.api['tasks.destroy']({ taskId: t.id });
    expect((await rig.exec(`ls -A ${rig.storageDir}/sandboxes`)).stdout).toBe('');
  });
});
