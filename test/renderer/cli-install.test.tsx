// Settings' "Command line": the user reads there the exact command that puts
// `factory` on PATH for this install. The bridge answers with what the host's own
// cliInstall computes for each kind of install (packaged, AppImage, a clone).
import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { FactoryError } from '../../common/errors.js';
import { cliInstall } from '../../main/cli/cli-install.js';
import { mountWith, RecordingBridge } from './support/app-harness.js';

afterEach(cleanup);

function open(answer: () => unknown) {
  const bridge = new RecordingBridge({
    'system.status': () => ({ qemu: { ok: true }, image: { state: 'ready', version: 'v3' }, dataDir: '/data', host: 'electron' }),
    'settings.get': () => ({ defaultAgent: 'command', maxParallelTasks: 2, vmMemoryMb: 2048, vmCpus: 2, terminalLogRetentionDays: 30, egressRules: [], layerBudgetGb: 20, agents: ['command'] }),
    'tasks.list': () => [],
    'terminal.list': () => [],
    'system.cliInstall': answer,
  });
  mountWith(bridge);
  fireEvent.click(screen.getByTestId('nav-settings'));
  return bridge;
}

describe('Settings: Command line', () => {
  it('shows the packaged app the ln -s of its own launcher, quoted for a path with spaces', async () => {
    const bridge = open(() => cliInstall({ resourcesPath: '/opt/Factory in a Box/resources' }));
    const command = await screen.findByTestId('settings-cli-command');
    expect(command.textContent).toBe("mkdir -p ~/.local/bin && ln -s '/opt/Factory in a Box/resources/factory' ~/.local/bin/factory");
    expect(screen.getByTestId('settings-cli-status').textContent).toBe('Put the factory command on your PATH:');
    expect(bridge.inputs('system.cliInstall')).toEqual([{}]);
  });

  it('tells a clone (or the web host) to build and npm link, or to use npm run factory', async () => {
    open(() => cliInstall({}));
    expect((await screen.findByTestId('settings-cli-command')).textContent).toBe('npm run build && npm link');
    expect(screen.getByTestId('settings-cli').textContent).toContain('npm run factory -- <command>');
  });

  it('gives an AppImage a script that runs the AppImage file, not a link into its passing mount', async () => {
    open(() => cliInstall({ resourcesPath: '/tmp/.mount_FactoryXYZ/resources', appImage: "/home/me/Apps/Factory in a Box's.AppImage" }));
    const text = (await screen.findByTestId('settings-cli-command')).textContent!;
    expect(text).not.toContain('.mount_');
    expect(text).toContain('Factory in a Box');
  });

  it('says so when the host cannot answer (an older host), instead of showing nothing', async () => {
    open(() => {
      throw FactoryError.carried('NotImplemented', 'system.cliInstall');
    });
    // The section is there (saying "Loading…") before the host's answer is: wait for what replaces it.
    await waitFor(() => expect(screen.getByTestId('settings-cli').textContent).toMatch(/Could not tell how to install the factory command: .*system\.cliInstall/));
  });
});
