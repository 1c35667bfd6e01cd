// The whole app on a throwaway data folder, as the VM tests start it (the real
// image store, QEMU and proxy), with its terminal output collected as the UI
// receives it. Its dispose() also removes the layers its tasks made: they live in
// the shared cache next to the base image, not in the data folder.
import fs from 'node:fs';
import { createFactoryApp, type FactoryApp, type FactoryAppOptions } from '../../main/app.js';
import { appPaths, type AppPaths } from '../../main/state/paths.js';
import { tempDir } from './repo.js';

type TestAppOptions = Omit<FactoryAppOptions, 'host' | 'paths'>;

export interface TestApp {
  app: FactoryApp;
  dataDir: string;
  paths: AppPaths;
  /** Terminal output by session id, as the UI would receive it. */
  output: Map<string, string>;
  /** Removes the layers of this app's tasks, ends the app and deletes its data folder. */
  dispose(): Promise<void>;
}

/** Starts the app in a new temp folder named by `prefix`; options may be built from its paths (a broker needs them). */
export async function startTestApp(prefix: string, options: TestAppOptions | ((paths: AppPaths) => TestAppOptions) = {}): Promise<TestApp> {
  const dataDir = tempDir(prefix);
  const paths = appPaths({ ...process.env, FACTORY_DATA_DIR: dataDir });
  let app: FactoryApp;
  try {
    app = await createFactoryApp({ host: 'web', paths, ...(typeof options === 'function' ? options(paths) : options) });
  } catch (err) {
    fs.rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  return {
    app,
    dataDir,
    paths,
    output: collectTerminalOutput(app),
    async dispose() {
      try {
        await removeLayersOf(app);
      } finally {
        await app.dispose();
        fs.rmSync(dataDir, { recursive: true, force: true });
      }
    },
  };
}

/** Terminal output by session id, as the UI would receive it. */
export function collectTerminalOutput(app: FactoryApp): Map<string, string> {
  const output = new Map<string, string>();
  app.onTerminalData((e) => output.set(e.sessionId, (output.get(e.sessionId) ?? '') + Buffer.from(e.data).toString('utf8')));
  return output;
}

/** Removes the layers made for the repositories of this app's tasks (a run's layers go with its repositories). */
export async function removeLayersOf(app: FactoryApp): Promise<void> {
  const mine = new Set((await app.api['tasks.list']({})).map((t) => t.repoPath));
  for (const l of await app.api['layers.list']({})) if (mine.has(l.repo)) await app.api['layers.remove']({ id: l.id });
}
