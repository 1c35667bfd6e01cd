// Web-host entry (`npm start` without Electron): the app on 127.0.0.1, its URL
// with the access token printed, the base image built in the background on first
// use (progress in the UI and here). Ctrl-C tears every sandbox down.
//   node dist/main/host/web/main.js [--port N]     (FACTORY_WEB_PORT, FACTORY_WEB_TOKEN also work)
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createFactoryApp } from '../../app.js';
import { startWebHost } from './web-host.js';

function portFromArgs(argv: string[]): number | undefined {
  const i = argv.indexOf('--port');
  const raw = i >= 0 ? argv[i + 1] : process.env.FACTORY_WEB_PORT;
  if (raw === undefined) return undefined;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port: not a port number: ${raw}`);
  return port;
}

async function main(): Promise<void> {
  const here = path.dirname(fileURLToPath(import.meta.url)); // dist/main/host/web
  const staticDir = path.resolve(here, '../../../renderer');
  const port = portFromArgs(process.argv.slice(2));
  const app = await createFactoryApp({ host: 'web' });
  const token = process.env.FACTORY_WEB_TOKEN || undefined;
  // The token opens the whole API: keep it out of the environment that host shells inherit.
  delete process.env.FACTORY_WEB_TOKEN;
  const host = await startWebHost(app, { staticDir, port, token });

  let stopping = false;
  const stop = async (why: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`\n${why}: stopping; tearing down every sandbox…`);
    await host.close();
    await app.dispose();
    console.log('stopped.');
    process.exit(0);
  };
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => void stop(sig));

  console.log('');
  console.log('  Factory in a Box is running. Open this address in your browser:');
  console.log('');
  console.log(`    ${host.url}`);
  console.log('');
  console.log('  (127.0.0.1 only; the token in the address is required. Ctrl-C stops the app.)');
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
