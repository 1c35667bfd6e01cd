import { useController, useFactory } from '../state/context.js';
import { errorHelp } from '../../common/errors.js';
import { ErrorBox } from './ErrorBox.js';
import { formatBytes, formatMemory } from './format.js';
import { PoolStatus } from './PoolStatus.js';
import { ShortcutsHelp } from './ShortcutsHelp.js';
import { HostsStatus } from './hosts/HostsStatus.js';
import { StatusIcon } from './icons.js';

const IMAGE_WORDS: Record<string, string> = {
  ready: 'Sandbox image ready',
  building: 'Building the sandbox image',
  missing: 'No sandbox image yet',
  failed: 'Sandbox image build failed',
};

function accelTitle(accel: string): string {
  return accel === 'tcg'
    ? 'No hardware virtualisation (KVM or HVF) is usable here: sandboxes run under software emulation (TCG), several times slower'
    : `Sandboxes run with hardware virtualisation (${accel.toUpperCase()})`;
}

export function Header() {
  const status = useFactory((s) => s.status);
  const statusError = useFactory((s) => s.statusError);
  const connection = useFactory((s) => s.connection);
  const view = useFactory((s) => s.view);
  const controller = useController();
  const image = status?.image;
  // The probe runs at the first boot; until the status is fetched again, a running sandbox tells.
  const sandboxAccel = useFactory((s) => Object.values(s.tasks).find((t) => t.sandbox.accel)?.sandbox.accel);
  const accel = status?.accel ?? sandboxAccel;
  // A booting sandbox already holds its memory, so it counts as running here.
  const running = useFactory((s) => Object.values(s.tasks).filter((t) => t.sandbox.status === 'running' || t.sandbox.status === 'booting').length);
  const vmMemoryMb = useFactory((s) => s.settings?.vmMemoryMb);
  // What the running sandboxes' QEMUs hold on the host now (their latest samples), when the host samples them.
  const inUse = useFactory((s) =>
    Object.values(s.tasks).reduce((sum, t) => {
      const last = t.sandbox.status === 'running' && s.stats[t.id]?.live ? s.stats[t.id]?.samples.at(-1) : undefined;
      return last ? (sum ?? 0) + last.pssBytes : sum;
    }, undefined as number | undefined),
  );
  const keychain = status?.keychain;
  return (
    <header className="app-header" data-testid="system-status" data-region="header">
      <h1>Factory in a Box</h1>
      <nav className="views" aria-label="Screens">
        <button type="button" className={view === 'tasks' ? 'nav active' : 'nav'} aria-current={view === 'tasks' ? 'page' : undefined} data-testid="nav-tasks" onClick={() => controller.showView('tasks')}>
          Tasks
        </button>
        <button type="button" className={view === 'credentials' ? 'nav active' : 'nav'} aria-current={view === 'credentials' ? 'page' : undefined} data-testid="nav-credentials" onClick={() => controller.showView('credentials')}>
          Credentials
        </button>
        <button type="button" className={view === 'environments' ? 'nav active' : 'nav'} aria-current={view === 'environments' ? 'page' : undefined} data-testid="nav-environments" onClick={() => controller.showView('environments')}>
          Environments
        </button>
        <button type="button" className={view === 'settings' ? 'nav active' : 'nav'} aria-current={view === 'settings' ? 'page' : undefined} data-testid="nav-settings" onClick={() => controller.showView('settings')}>
          Settings
        </button>
      </nav>
      <ShortcutsHelp />
      <div className="status-items">
        {connection !== 'open' ? (
          <span className="pill warn" data-testid="connection-status">
            {connection === 'connecting' ? 'connecting…' : 'disconnected, reconnecting…'}
          </span>
        ) : null}
        {status ? (
          <>
            {status.qemu.ok ? (
              <span className="pill ok" data-testid="qemu-status" title="QEMU runs every sandbox on this computer">
                <StatusIcon status="passed" /> QEMU {status.qemu.version ?? ''}
              </span>
            ) : (
              <span className="pill bad" data-testid="qemu-status">
                QEMU missing
                {status.qemu.installHint ? (
                  <span className="hint" data-testid="qemu-install-hint">
                    {' '}
                    — {status.qemu.installHint}
                  </span>
                ) : null}
              </span>
            )}
            {accel ? (
              <span className={`pill ${accel === 'tcg' ? 'warn' : 'ok'}`} data-testid="accel" data-accel={accel} title={accelTitle(accel)}>
                <span aria-hidden="true">{accel === 'tcg' ? '⚠' : '⚡'}</span> {accel === 'tcg' ? 'Software emulation' : `Hardware acceleration (${accel.toUpperCase()})`}
              </span>
            ) : null}
            {image ? (
              <span
                className={`pill ${image.state === 'ready' ? 'ok' : image.state === 'failed' ? 'bad' : 'warn'}`}
                data-testid="image-status"
                data-state={image.state}
                title={`The base image every sandbox starts from, version ${image.version}`}
              >
                <StatusIcon status={image.state === 'ready' ? 'passed' : image.state === 'failed' ? 'failed' : 'running'} /> {IMAGE_WORDS[image.state] ?? `Sandbox image ${image.state}`}
                {image.state === 'building' ? (
                  <>
                    {' '}
                    <progress data-testid="image-progress" max={1} value={image.progress ?? 0} />{' '}
                    <span className="hint">{image.step ?? ''}</span>
                  </>
                ) : null}
                {image.state === 'missing' || image.state === 'failed' ? (
                  <button type="button" className="small" data-testid="build-image-button" onClick={() => void controller.buildImage()}>
                    {image.state === 'failed' ? 'Retry build' : 'Build now'}
                  </button>
                ) : null}
              </span>
            ) : null}
            {keychain ? (
              keychain.ok ? (
                <span className="pill ok" data-testid="keychain-status" data-state="available" title="Credentials are kept in this computer's keychain">
                  <StatusIcon status="passed" /> Keychain available
                </span>
              ) : (
                <span className="pill bad" data-testid="keychain-status" data-state="unavailable" title={keychain.error?.message}>
                  keychain unavailable
                  <span className="hint" data-testid="keychain-fix">
                    {' '}
                    — {errorHelp(keychain.error?.name ?? 'KeychainUnavailable').help}
                  </span>
                </span>
              )
            ) : null}
            <span className="pill" data-testid="sandbox-usage" data-count={running} title="Sandboxes running or starting now, and the guest memory they were given">
              {running === 1 ? '1 sandbox' : `${running} sandboxes`}
              {running > 0 && vmMemoryMb ? `, ${formatMemory(running * vmMemoryMb)}` : ''}
              {running > 0 && inUse !== undefined ? (
                <span data-testid="sandbox-memory-in-use" title="Memory their QEMU processes hold on this computer now (PSS)">
                  {' '}
                  · {formatBytes(inUse)} in use
                </span>
              ) : null}
            </span>
            <PoolStatus />
            <HostsStatus />
            <span className="pill muted" title={status.dataDir}>
              {status.host} host
            </span>
          </>
        ) : null}
      </div>
      {image?.state === 'failed' && image.error ? (
        <ErrorBox testId="image-error" error={{ name: 'ImageBuildFailed', message: image.error }} />
      ) : null}
      {statusError ? <ErrorBox testId="status-error" error={statusError} /> : null}
    </header>
  );
}
