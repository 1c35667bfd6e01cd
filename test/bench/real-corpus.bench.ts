// The corpus bench: every project in test/fixtures/real/, run with
//   bash test/support/with-keyring.sh npx tsx test/bench/real-corpus.bench.ts [name ...]
// One app runs each through setup, build and test in a sandbox, one after
// another, and prints one line per project (setup, build and test cards, time):
// the measurements behind test/fixtures/real/MATRIX.md. Projects that need a
// `.factory/pipeline.json` also run without it (`--out-of-the-box`) so the
// matrix can say what happens to a user who has not added it yet.
import fs from 'node:fs';
import os from 'node:os';
import { defaultEgressRules } from '../../common/egress.js';
import { createFactoryApp } from '../../main/app.js';
import { appPaths } from '../../main/state/paths.js';
import { egressRulesForThisNetwork } from '../support/egress-network.js';
import { testImage } from '../support/image.js';
import { CORPUS, corpusEgressRules, describeRun, runCorpusProject } from '../support/real-corpus.js';
import { tempDir } from '../support/repo.js';
import { removeLayersOf } from '../support/test-app.js';

async function main() {
  const args = process.argv.slice(2);
  const outOfTheBox = args.includes('--out-of-the-box');
  const names = args.filter((a) => !a.startsWith('--'));
  const projects = names.length > 0 ? CORPUS.filter((p) => names.includes(p.name)) : CORPUS;
  const image = await testImage();
  const dataDir = tempDir('fcorpus-bench-');
  const app = await createFactoryApp({
    host: 'web',
    paths: appPaths({ ...process.env, FACTORY_DATA_DIR: dataDir }),
    // The default rules, and those a user adds in Settings for the corpus's projects (the Yarn registry).
    settings: { maxParallelTasks: 1, egressRules: await egressRulesForThisNetwork([...defaultEgressRules(), ...corpusEgressRules(projects)]) },
  });
  let failed = 0;
  try {
    console.log(`image ${image.version}, ${os.cpus().length} host cores, load ${os.loadavg()[0]!.toFixed(2)}`);
    for (const project of projects) {
      for (const bare of outOfTheBox && project.pipeline ? [true, false] : [false]) {
        const r = await runCorpusProject(app, project, { outOfTheBox: bare });
        if (!r.ok && !bare) failed++;
        console.log(describeRun(r));
      }
    }
  } finally {
    await removeLayersOf(app);
    await app.dispose();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  console.log(`${projects.length - failed} of ${projects.length} projects as expected`);
  process.exitCode = failed > 0 ? 1 : 0;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
