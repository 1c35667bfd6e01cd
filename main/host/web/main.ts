// Web-host entry (`npm start` without Electron): the app on 127.0.0.1, its URL
// with the access token printed, the base image built in the background on first
// use (progress in the UI and here). Ctrl-C tears every sandbox down.
//   node dist/main/host/web/main.js [--port N] [--headless]     (FACTORY_WEB_PORT, FACTORY_WEB_TOKEN also work)
// It also serves the factory CLI on <data dir>/factory.sock, and refuses to start when
// another app already uses the data dir. --headless: started by the CLI, detached,
// its output going to the data dir's logs (the address is printed there too).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createFactoryApp } from '../../app.js';
import { appPaths } from '../../state/paths.js';
import { idleExitMs } from '../../instance/idle-exit.js';
import { acquireInstanceLock } from '../../instance/instance-lock.js';
import { startSocketHost } from '../socket/socket-host.js';
import { startWebHost } from './web-host.js';

function portFromArgs(argv: string[]): number | undefined {
  const i = argv.indexOf('--port');
  const raw = i >= 0 ? argv[i + 1] : process.env.FACTORY_WEB_PORT;
  if (raw === undefined) return undefined;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port: not a port number: ${raw}`);
  return port;
}

let stop: (why: string) => Promise<void> = async () => undefined;

async function main(): Promise<void> {
  const here = path.dirname(fileURLToPath(import.meta.url)); // dist/main/host/web
  const staticDir = path.resolve(here, '../../../renderer');
  const port = portFromArgs(process.argv.slice(2));
  const headless = process.argv.includes('--headless');
  const paths = appPaths();
  // Before any service starts: a second app would take the first one's sandboxes for leftovers.
  const lock = acquireInstanceLock(paths.data);
  process.on('exit', () => lock.release());
  // A headless app ends by itself once nothing runs for a while (FACTORY_IDLE_EXIT_SEC, 10 minutes by default).
  const app = await createFactoryApp({ host: 'web', paths, quit: (why) => void stop(why), ...(headless ? { idleExitMs: idleExitMs() } : {}) });
  const token = process.env.FACTORY_WEB_TOKEN || undefined;
  // The token opens the whole API: keep it out of the environment that host shells inherit.
  delete process.env.FACTORY_WEB_TOKEN;
  const host = await startWebHost(app, { staticDir, port, token });
  const socket = await startSocketHost(app, { dataDir: paths.data });

  let stopping = false;
  stop = async (why: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`\n${why}: stopping; tearing down every sandbox…`);
    await socket.close();
    await host.close();
    await app.dispose();
    lock.release();
    console.log('stopped.');
    process.exit(0);
  };
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => void stop(sig));

  console.log('');
  console.log('  Factory in a Box is running. Open this address in your browser:');
  console.log('');
  console.log(`    ${host.url}`);
  console.log('');
  console.log(`  (127.0.0.1 only; the token in the address is required. ${headless ? `It ends by itself after ${Math.round(idleExitMs() / 60_000)} min with nothing running; factory quit ends it now.` : 'Ctrl-C stops the app.'})`);
  console.log(`  The factory CLI talks to it on ${socket.path}`);
  console.log('');

  // Build the base image now rather than on the first task; progress is shown in the UI too.
  const status = await app.api['system.status']({});
  if (status.image.state !== 'ready') {
    let lastStep = '';
    const off = app.onEvent((e) => {
      if (e.type !== 'image.progress' || e.status.step === lastStep) return;
      lastStep = e.status.step ?? '';
      console.log(`  base image: ${e.status.state} ${Math.round((e.status.progress ?? 0) * 100)}% ${lastStep}`);
    });
    app.api['image.ensure']({})
      .then((s) => console.log(`  base image ${s.version}: ${s.state}`))
      .catch((err: Error) => console.error(`  base image build failed: ${err.message}`))
      .finally(off);
  }
}

main().catch((err: Error) => {
  console.error(`Factory in a Box failed to start: ${err.message}`);
  process.exit(1);
});
