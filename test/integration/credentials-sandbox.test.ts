// The credential broker with one real sandbox (QEMU, restrict=on): inside the
// guest, curl reaches the model-API stub and git clones from a basic-auth git
// http-backend, both only through the proxy at 10.0.2.100 (guestfwd → socat →
// the sandbox's unix socket), with the real values coming from the real
// keychain. A push outside the allowed refs is refused; a host loopback service
// is unreachable. Afterwards the leak check finds no credential in the overlay,
// a QMP dump of guest memory or the serial log — and, as the control that
// proves it can fail, finds values planted on the guest's disk (plain and
// gzipped), in its memory and on its serial console.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CredentialBroker } from '../../main/credentials/broker.js';
import { KeychainStore } from '../../main/credentials/keychain.js';
import type { QmpExecutor } from '../../main/credentials/leak-check.js';
import { guestEnvScript } from '../../main/credentials/routes.js';
import type { SandboxSsh } from '../../main/ssh/sandbox-ssh.js';
import { appPaths } from '../../main/state/paths.js';
import { QemuDriver, sandboxFiles, type RunningVm } from '../../main/vm/qemu-driver.js';
import { startGitServer, type GitServer } from '../support/git-server.js';
import { createTestCa, type TestCa } from '../support/https.js';
import { testImage } from '../support/image.js';
import { requireSecretService } from '../support/keyring.js';
import { startModelStub, type ModelStub } from '../support/model-stub.js';

const TASK = 'credtest1';
const shq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
const ANTHROPIC_KEY = `sk-ant-sandbox-${randomBytes(20).toString('hex')}`;
const GIT_TOKEN = `ghp_${randomBytes(20).toString('hex')}`;

describe('credentials in a real sandbox', () => {
  let root: string;
  let ca: TestCa;
  let stub: ModelStub;
  let gitServer: GitServer;
  let keychain: KeychainStore;
  let broker: CredentialBroker;
  let vm: RunningVm | undefined;
  let ssh: SandboxSsh;
  let envScript: string;
  let hostOnly: http.Server;
  let hostOnlyPort: number;
  let ids: { anthropic: string; git: string };
  const keychainService = `factory-in-a-box-it-${randomBytes(4).toString('hex')}`;

  /** Runs a command in the guest as the agent user with the proxy environment. */
  const guest = (cmd: string, timeoutMs = 120_000) =>
    ssh.run(`cat > /tmp/fenv <<'EOF'\n${envScript}EOF\nsu agent -s /bin/bash -c ${shq(`. /tmp/fenv; cd /home/agent; ${cmd}`)}`, { timeoutMs, maxBytes: 1 << 20 });

  beforeAll(async () => {
    requireSecretService();
    const image = await testImage();
    // Short path: the proxy socket and the QMP socket live in the sandbox folder.
    root = await mkdtemp(path.join(os.tmpdir(), 'fcs-'));
    ca = createTestCa();
    stub = await startModelStub(ca, { anthropicKey: ANTHROPIC_KEY, sseDelayMs: 30 });
    gitServer = await startGitServer(ca, { user: 'x-access-token', token: GIT_TOKEN });
    gitServer.createRepo('project', { 'README.md': '# project through the proxy\n' });
    hostOnly = http.createServer((_q, r) => r.end('host-only-service'));
    await new Promise<void>((r) => hostOnly.listen(0, '127.0.0.1', r));
    hostOnlyPort = (hostOnly.address() as { port: number }).port;

    keychain = new KeychainStore({ service: keychainService });
    broker = new CredentialBroker({
      paths: appPaths({ FACTORY_DATA_DIR: path.join(root, 'data'), FACTORY_CACHE_DIR: path.join(root, 'cache') }),
      secrets: keychain,
      upstreamCa: ca.cert,
      allowAddress: (ip, host) => host === 'localhost' && ip === '127.0.0.1',
      gitRouteFor: () => ({ repoUrl: gitServer.repoUrl('project'), credentialId: ids.git, allowPush: true }),
    });
    const api = broker.api();
    const a = await api['credentials.set']({ kind: 'anthropic', label: 'Anthropic', value: ANTHROPIC_KEY, target: { upstream: stub.url } });
    const g = await api['credentials.set']({ kind: 'git', label: 'Git host', value: GIT_TOKEN, target: { upstream: gitServer.url } });
    ids = { anthropic: a.id, git: g.id };

    const sandboxDir = path.join(root, 'sb');
    const prepared = await broker.prepare({ taskId: TASK, sandboxDir });
    envScript = guestEnvScript(prepared.guestEnv);
    expect(envScript).not.toContain(ANTHROPIC_KEY);
    expect(envScript).not.toContain(GIT_TOKEN);
    vm = await new QemuDriver({ snapshotsDir: appPaths().snapshots }).start({ sandboxDir, image, memoryMb: 1024, guestForwards: prepared.guestForwards });
    console.log(`sandbox booted in ${vm.bootMs} ms (${vm.accel})`);
    ssh = await vm.ssh();
  });

  afterAll(async () => {
    ssh?.close();
    await vm?.destroy();
    await broker?.dispose();
    for (const id of Object.values(ids ?? {})) await keychain?.remove(id).catch(() => undefined); // teardown: the test may have ended before storing it
    await stub?.close();
    await gitServer?.dispose();
    hostOnly?.close();
    ca?.dispose();
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('curl in the guest reaches the model API through the proxy; the guest only ever holds the placeholder', async () => {
    const before = stub.requests.length;
    const body = JSON.stringify({ model: 'claude-stub', max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'hi' }] });
    const r = await guest(
      `curl -sS -N --fail-with-body -X POST "$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: $ANTHROPIC_API_KEY" -H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' -d '${body}'`,
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('event: message_start');
    expect(r.stdout).toContain('event: message_stop');
    const seen = stub.requests.slice(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers['x-api-key']).toBe(ANTHROPIC_KEY);
    const env = await guest('env');
    expect(env.stdout).toMatch(/ANTHROPIC_API_KEY=fiab-placeholder-/);
    expect(env.stdout).not.toContain(ANTHROPIC_KEY);
    const wrong = await guest(`curl -sS -o /dev/null -w '%{http_code}' -X POST "$ANTHROPIC_BASE_URL/v1/messages" -H 'x-api-key: guessed' -d '{}'`);
    expect(wrong.stdout).toBe('403');
  });

  it('git in the guest clones through the proxy; a push outside factory/<task>/* is refused, a new task branch is allowed', async () => {
    const clone = await guest('git clone -q "$FACTORY_GIT_URL" repo && git -C repo log --format=%s && cat repo/README.md');
    expect(clone.stderr).toBe('');
    expect(clone.stdout).toContain('# project through the proxy');
    expect(gitServer.authSeen).toContain(`Basic ${Buffer.from(`x-access-token:${GIT_TOKEN}`).toString('base64')}`);
    const commit = await guest(
      'cd repo && git -c user.name=agent -c user.email=agent@sandbox.invalid commit -q --allow-empty -m "agent work" && git rev-parse HEAD',
    );
    expect(commit.code).toBe(0);
    const refsBefore = gitServer.refs('project');
    const push = await guest('cd repo && git push origin HEAD:refs/heads/main 2>&1; echo "exit=$?"');
    expect(push.stdout).toMatch(/refused: only new branches under refs\/heads\/factory\/credtest1\//);
    expect(push.stdout).not.toContain('exit=0');
    expect(gitServer.refs('project')).toEqual(refsBefore);
    const ok = await guest(`cd repo && git push -q origin HEAD:refs/heads/factory/${TASK}/work 2>&1; echo "exit=$?"`);
    expect(ok.stdout).toContain('exit=0');
    expect(gitServer.refs('project')[`refs/heads/factory/${TASK}/work`]).toBe(commit.stdout.trim());
  });

  it('the guest cannot reach services on the host loopback', async () => {
    for (const port of [hostOnlyPort, stub.port, gitServer.port]) {
      // Directly (the guest's proxy variables set aside): no route.
      const direct = `curl --noproxy '*' -sS -m 5 -k`;
      const r = await guest(`${direct} http://10.0.2.2:${port}/ 2>&1 || echo unreachable; ${direct} https://10.0.2.2:${port}/ 2>&1 || echo unreachable`, 60_000);
      expect(r.stdout).not.toContain('host-only-service');
      expect(r.stdout).not.toContain('message');
      expect(r.stdout.match(/unreachable/g)).toHaveLength(2);
      // Through the proxy (as the guest's HTTP_PROXY sends it): refused, an address is never a rule.
      const viaProxy = await guest(`curl -sS -m 10 -w '\\n%{http_code}' http://10.0.2.2:${port}/ 2>&1; curl -sS -m 10 -k https://10.0.2.2:${port}/ 2>&1 || echo refused`, 60_000);
      expect(viaProxy.stdout).not.toContain('host-only-service');
      expect(viaProxy.stdout).toMatch(/IP literal[\s\S]*403/);
      expect(viaProxy.stdout).toMatch(/CONNECT tunnel failed, response 403|refused/);
    }
    // And the proxy itself refuses anything but its rules.
    const other = await guest(`curl -sS -w '\\n%{http_code}' http://10.0.2.100/elsewhere/`);
    expect(other.stdout).toMatch(/no rule matches this path[\s\S]*403$/);
  });

  it('the leak check finds no credential in the overlay or guest memory after use — and finds a planted one', async () => {
    await ssh.run('sync');
    // As the app does: the VM's own QMP connection (one client per socket) and its QEMU process, whose memory is read.
    const sources = { qmp: (): Promise<QmpExecutor> => vm!.qmp(), qemuPid: vm!.pid };
    const clean = await broker.leakCheck(TASK, sources);
    console.log(`leak check (clean): ${JSON.stringify(clean.scanned)} in ${clean.durationMs} ms`);
    expect(clean.scanned.map((s) => s.source).sort()).toEqual(['disk overlay', 'guest memory', 'returned work', 'serial log', 'stage logs']);
    for (const s of clean.scanned) expect(s.error, s.source).toBeUndefined();
    for (const s of clean.scanned.filter((x) => ['disk overlay', 'guest memory'].includes(x.source))) expect(s.bytes).toBeGreaterThan(1_000_000);
    expect(clean.scanned.find((s) => s.source === 'serial log')!.bytes).toBeGreaterThan(0);
    // Read from QEMU's process, not dumped (a dump would say why in a note), page edges included.
    expect(clean.scanned.find((s) => s.source === 'guest memory')!.note).toBeUndefined();
    expect(clean.credentialIds.sort()).toEqual([ids.anthropic, ids.git].sort());
    expect(clean.hits).toEqual([]);
    expect(clean.verdict).toBe('clean');

    // Control: put the real git token on the guest's disk (and so in its page cache), as base64 of
    // the basic-auth header a careless tool would store, and gzipped as a cached HTTP exchange;
    // write the Anthropic key to the serial console as upper-case hex, and raw into a process's memory.
    const basic = Buffer.from(`x-access-token:${GIT_TOKEN}`).toString('base64');
    const hexUpper = Buffer.from(ANTHROPIC_KEY).toString('hex').toUpperCase();
    const planted = await ssh.run(
      `printf 'Authorization: Basic %s\\n' '${basic}' > /root/planted.txt && ` +
        `printf 'GET / HTTP/1.1\\r\\nauthorization: Basic %s\\r\\n\\r\\n' '${basic}' | gzip > /root/exchange.gz && sync; ` +
        `printf '%s\\n' ${hexUpper} > /dev/ttyS0; ` +
        `setsid bash -c 'k=$(printf %s ${Buffer.from(ANTHROPIC_KEY).toString('base64')} | base64 -d); echo "$k" > /dev/null; touch /tmp/held; sleep 600' </dev/null >/dev/null 2>&1 & ` +
        `for i in $(seq 1 100); do [ -e /tmp/held ] && break; sleep 0.1; done; echo ok`,
    );
    expect(planted.stdout.trim()).toBe('ok');
    const dirty = await broker.leakCheck(TASK, sources);
    expect(dirty.verdict).toBe('leak');
    const found = new Set(dirty.hits.map((h) => `${h.source}:${h.credentialId}:${h.encoding}`));
    console.log(`leak check (planted): ${[...found].join(', ')}`);
    expect(found).toContain(`overlay:${ids.git}:basic-auth(x-access-token)`);
    expect(found).toContain(`memory:${ids.git}:basic-auth(x-access-token)`);
    expect([...found].some((f) => f.startsWith(`memory:${ids.anthropic}:raw`))).toBe(true);
    expect(found).toContain(`overlay:${ids.git}:gzip>basic-auth(x-access-token)`);
    expect(found).toContain(`serial-log:${ids.anthropic}:hex-upper`);
    expect(JSON.stringify(dirty)).not.toContain(GIT_TOKEN);
    expect(JSON.stringify(dirty)).not.toContain(ANTHROPIC_KEY);
    // Teardown: the overlay that held the planted values is gone with the sandbox.
    const overlay = sandboxFiles(vm!.sandboxDir).overlay;
    expect(existsSync(overlay)).toBe(true);
    ssh?.close();
    await vm!.destroy();
    vm = undefined;
    expect(existsSync(overlay)).toBe(false);
  });
});
