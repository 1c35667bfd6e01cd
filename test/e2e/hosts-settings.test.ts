// Settings › Sandbox hosts in Chromium, against the real web host: the hosts.*
// API is the real one (Settings store, SSH, libvirt) reaching the stand-in host
// of test/support/remote-host.ts (an OpenSSH server on 127.0.0.1 in front of
// libvirt); the rest of the app is the scripted one the fast UI specs use.
// A user adds a host by keyboard and mouse, is refused a hostile destination by
// name, checks the host, compares and trusts its key, saves it, sees it listed
// with its state, and the new-task form offers it. Adding it again, an alias of
// the user's SSH config fills the form in; one behind a jump host is refused.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FactoryApi } from '../../common/contract.js';
import { stderrLogger } from '../../main/log/logger.js';
import { startWebHost, type WebHost } from '../../main/host/web/web-host.js';
import { hostsApi } from '../../main/remote/hosts-api.js';
import { SandboxHosts } from '../../main/remote/sandbox-hosts.js';
import { SettingsStore } from '../../main/state/settings.js';
import { startRemoteHost, type RemoteHostRig } from '../support/remote-host.js';
import { describeViolations, screenshot, seriousViolations } from './support/axe.js';
import { chromiumMissingReason, openBrowser, type OpenBrowser } from './support/browser.js';
import { ensureE2eRendererBuilt } from './support/build.js';
import { tabTo } from './support/keyboard.js';
import { ScriptedApp } from './support/scripted-app.js';
import { projectRoot, staticDir } from './support/scripted-ui.js';

const missing = chromiumMissingReason();
if (missing) console.log(`hosts-settings skipped: ${missing}`);

describe.skipIf(!!missing)('adding a sandbox host in Settings', () => {
  let rig: RemoteHostRig;
  let dir: string;
  let app: ScriptedApp;
  let hosts: SandboxHosts;
  let web: WebHost;
  let browser: OpenBrowser;

  beforeAll(async () => {
    ensureE2eRendererBuilt(projectRoot);
    rig = await startRemoteHost();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hosts-settings-'));
    const settings = new SettingsStore({ dir });
    hosts = new SandboxHosts({ settings: () => settings.get(), log: stderrLogger('hosts') });
    app = new ScriptedApp(40);
    // The user's known_hosts is empty here: the key must be compared and trusted in the UI.
    // The user's SSH config: the rig under an alias, and a host behind a jump host.
    const sshConfig = path.join(dir, 'ssh_config');
    fs.writeFileSync(sshConfig, [`Host rig`, `  HostName 127.0.0.1`, `  Port ${rig.port}`, `  User root`, `  IdentityFile ${rig.keyFile}`, `Host inner`, `  HostName inner.lan`, `  ProxyJump rig`, ''].join('\n'));
    const real = hostsApi({ settings, hosts, tasks: () => [], access: { knownHosts: async () => '', agentSocket: () => undefined }, sshConfig: { file: sshConfig } });
    const api = new Proxy(app.api, { get: (t, m: string) => (m in real ? real[m as keyof typeof real] : t[m as keyof FactoryApi]) });
    web = await startWebHost({ api, onEvent: (l) => app.onEvent(l), onTerminalData: (l) => app.onTerminalData(l) }, { staticDir });
    browser = await openBrowser();
    await browser.page.setViewportSize({ width: 1400, height: 1000 });
  });

  afterAll(async () => {
    await browser?.close();
    await web?.close();
    hosts?.close();
    await app?.dispose();
    await rig?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Focuses a field by Tab and types into it, replacing what it holds. */
  async function type(testId: string, text: string, opts: { backwards?: boolean } = {}) {
    const { page } = browser;
    await tabTo(page, testId, { max: 80, ...opts });
    await page.keyboard.press('ControlOrMeta+A');
    await page.keyboard.type(text);
  }

  it('refuses a destination that smuggles an ssh option, next to the field, keeping what was typed', async () => {
    const { page } = browser;
    await page.goto(web.url);
    await page.getByTestId('nav-settings').click();
    await page.getByTestId('sandbox-hosts').waitFor();
    expect(await page.getByTestId('hosts-empty').textContent()).toMatch(/No sandbox hosts/);
    await page.getByTestId('host-add').click();
    await type('host-name', 'rig');
    await type('host-destination', 'root@127.0.0.1 -oProxyCommand=touch%20/tmp/pwned');
    await type('host-port', String(rig.port));
    await tabTo(page, 'host-keySource');
    await page.getByTestId('host-keySource').selectOption('file');
    await type('host-keyFile', rig.keyFile);
    await type('host-capacity', '1');
    await type('host-storageDir', rig.storageDir);
    await page.getByTestId('host-virtType').selectOption('qemu');
    await page.getByTestId('host-check').click();
    const err = page.getByTestId('host-destination-error');
    await err.waitFor();
    expect(await err.textContent()).toBe('SSH destination: contains a space');
    expect(await page.getByTestId('host-destination').getAttribute('aria-invalid')).toBe('true');
    expect(await page.getByTestId('host-destination').inputValue()).toBe('root@127.0.0.1 -oProxyCommand=touch%20/tmp/pwned');
    expect(await page.getByTestId('host-keyFile').inputValue()).toBe(rig.keyFile);
  });

  it('checks the host: shows the presented key to compare, then after Trust what libvirt there offers', async () => {
    const { page } = browser;
    await type('host-destination', 'root@127.0.0.1', { backwards: true });
    await tabTo(page, 'host-check');
    await page.keyboard.press('Enter');
    const fp = page.getByTestId('host-key-fingerprint');
    await fp.waitFor({ timeout: 60_000 });
    expect(await fp.textContent()).toBe(rig.hostKeyFingerprint);
    // Nothing is trusted yet: Save is refused, naming the host key.
    await page.getByTestId('host-save').click();
    await page.getByTestId('host-hostKeyFingerprint-error').waitFor();
    expect(await page.getByTestId('host-hostKeyFingerprint-error').textContent()).toMatch(/trust its host key first/);

    await tabTo(page, 'host-trust', { backwards: true });
    await page.keyboard.press('Enter');
    await page.getByTestId('host-facts').waitFor({ timeout: 120_000 });
    expect(await page.getByTestId('host-fact-libvirt').textContent()).toMatch(/answers, QEMU \d+\.\d+/);
    expect(await page.getByTestId('host-fact-accel').textContent()).toMatch(/KVM available|no KVM \(emulation only\)/);
    expect(await page.getByTestId('host-fact-disk').textContent()).toMatch(/\d+\.\d GiB/);
    await page.getByTestId('host-ready').waitFor();
    expect(await page.getByTestId('host-key-trusted').textContent()).toContain(rig.hostKeyFingerprint);
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      expect(describeViolations(await seriousViolations(page)), scheme).toEqual([]);
      await screenshot(page, scheme === 'light' ? 'hosts-settings-check' : 'hosts-settings-check-dark');
    }
    await page.emulateMedia({ colorScheme: 'light' });
  });

  it('saves the host with the trusted key; it is listed with its state and the new-task form offers it', async () => {
    const { page } = browser;
    await page.getByTestId('host-save').click();
    const row = page.locator('[data-testid="host-row"][data-host="rig"]');
    await row.waitFor({ timeout: 60_000 });
    expect(await row.getByTestId('host-load').textContent()).toBe('0/1 sandboxes');
    // Save connects; the list follows the host's state.
    await page.locator('[data-testid="host-row"][data-host="rig"][data-state="connected"]').waitFor({ timeout: 60_000 });
    expect(await row.textContent()).toContain(rig.hostKeyFingerprint);
    expect(describeViolations(await seriousViolations(page))).toEqual([]);

    await page.getByTestId('nav-tasks').click();
    const select = page.getByTestId('run-on-select');
    await select.waitFor();
    const options = await select.locator('option').allTextContents();
    expect(options[0]).toBe('This machine');
    expect(options[1]).toMatch(/^rig \(connected, 0\/1\)$/);
    expect(options[2]).toBe('Any (least loaded)');
  });

  it('a host whose connection drops shows as lost in the list and the header, and connected once it is back', async () => {
    const { page } = browser;
    // The stand-in host stops answering: its sshd listener is paused (new logins hang), its connections cut.
    const config = path.join(path.dirname(rig.keyFile), 'sshd_config');
    // The listener is the rig's own child of this test process (sshd retitles it, so match its config by parent).
    const listener = Number(execFileSync('pgrep', ['-P', String(process.pid), '-f', config], { encoding: 'utf8' }).trim());
    expect(listener).toBeGreaterThan(1);
    process.kill(listener, 'SIGSTOP');
    try {
      await rig.dropConnections();
      await page.getByTestId('hosts-status').waitFor({ timeout: 30_000 });
      expect(await page.getByTestId('hosts-status').textContent()).toBe('host rig lost');
      await page.getByTestId('nav-settings').click();
      await page.locator('[data-testid="host-row"][data-host="rig"][data-state="lost"]').waitFor({ timeout: 30_000 });
      expect(describeViolations(await seriousViolations(page))).toEqual([]);
    } finally {
      process.kill(listener, 'SIGCONT');
    }
    await page.locator('[data-testid="host-row"][data-host="rig"][data-state="connected"]').waitFor({ timeout: 90_000 });
    await page.getByTestId('hosts-status').waitFor({ state: 'detached', timeout: 30_000 });
  });

  it('removes the host only after the user confirms', async () => {
    const { page } = browser;
    await page.getByTestId('nav-settings').click();
    const row = page.locator('[data-testid="host-row"][data-host="rig"]');
    await row.getByTestId('host-remove').click();
    // Keep it: nothing happens.
    await row.getByTestId('host-remove-keep').click();
    expect(await row.count()).toBe(1);
    await row.getByTestId('host-remove').click();
    await row.getByTestId('host-remove-confirm').click();
    await page.getByTestId('hosts-empty').waitFor();
    expect(await row.count()).toBe(0);
    await page.getByTestId('nav-tasks').click();
    await page.getByTestId('new-task-form').waitFor();
    // Without hosts the form asks nothing about where to run (after its next look at the hosts).
    await page.getByTestId('run-on-select').waitFor({ state: 'detached', timeout: 30_000 });
  });

  it('fills the form in from an alias of the SSH config; an alias behind a jump host is refused next to the field', async () => {
    const { page } = browser;
    await page.getByTestId('nav-settings').click();
    await page.getByTestId('host-add').click();
    // Enter in the alias field fills the form in.
    await page.getByTestId('host-alias').click();
    await page.keyboard.type('inner');
    await page.keyboard.press('Enter');
    const err = page.getByTestId('host-alias-error');
    await err.waitFor();
    expect(await err.textContent()).toMatch(/^From your SSH config: inner goes through a jump host \(ProxyJump/);
    // Enter filled in (and was refused); it did not try to save the empty host.
    expect(await page.getByTestId('host-name-error').count()).toBe(0);

    await page.getByTestId('host-alias').fill('rig');
    await page.getByTestId('host-alias').press('Enter');
    await expect.poll(() => page.getByTestId('host-destination').inputValue()).toBe('root@127.0.0.1');
    expect(await page.getByTestId('host-alias-error').count()).toBe(0);
    expect(await page.getByTestId('host-name').inputValue()).toBe('rig');
    expect(await page.getByTestId('host-port').inputValue()).toBe(String(rig.port));
    expect(await page.getByTestId('host-keySource').inputValue()).toBe('file');
    expect(await page.getByTestId('host-keyFile').inputValue()).toBe(rig.keyFile);
    // What it filled in reaches the host.
    await page.getByTestId('host-check').click();
    const fp = page.getByTestId('host-key-fingerprint');
    await fp.waitFor({ timeout: 60_000 });
    expect(await fp.textContent()).toBe(rig.hostKeyFingerprint);
    expect(describeViolations(await seriousViolations(page))).toEqual([]);
    await page.getByTestId('host-cancel').click();
  });
});
