// Builds a base image from a recipe into a given (temporary) folder:
// agent CLIs from npm, a Debian rootfs by mmdebstrap (customized and turned
// into an ext4 disk by the recipe's hook, no mounting), a qcow2 base, and the
// manifest. Each step reports a 0..1 fraction; a failed step names itself and
// shows the last lines its tool printed.
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { FactoryError } from '../../common/errors.js';
import { ImageManifest, parsePackageList } from './image-manifest.js';
import type { LoadedRecipe } from './image-recipe.js';
import { findOnPath, runCommand, type CommandRunner, type RunResult } from './process-runner.js';
import { shellQuote } from '../../common/shell-quote.js';

export interface BuildProgress {
  step: string;
  /** 0..1 over the whole build. */
  progress: number;
}

interface StepDef {
  id: string;
  label: string;
  /** Fraction of the whole build at which the step starts. */
  start: number;
}

export const BUILD_STEPS: StepDef[] = [
  { id: 'check-tools', label: 'checking build tools', start: 0 },
  { id: 'agent-clis', label: 'fetching agent CLIs from npm', start: 0.01 },
  { id: 'rootfs', label: 'building the Debian root filesystem (mmdebstrap)', start: 0.1 },
  { id: 'configure', label: 'configuring the guest', start: 0.62 },
  { id: 'packages', label: 'reading package versions', start: 0.66 },
  { id: 'kernel', label: 'extracting kernel and initrd', start: 0.67 },
  { id: 'disk', label: 'making the ext4 disk (mkfs.ext4 -d)', start: 0.68 },
  { id: 'qcow2', label: 'converting the disk to qcow2', start: 0.82 },
  { id: 'checksums', label: 'computing checksums and writing the manifest', start: 0.9 },
];

// mmdebstrap phases, as fractions of the whole build.
const MMDEBSTRAP_PHASES: Array<[RegExp, number]> = [
  [/downloading packages/, 0.2],
  [/extracting archives/, 0.3],
  [/installing essential packages/, 0.35],
  [/installing remaining packages/, 0.42],
];

const REQUIRED_TOOLS: Array<{ program: string; hint: string }> = [
  { program: 'mmdebstrap', hint: 'install it with: sudo apt-get install mmdebstrap (Debian/Ubuntu)' },
  { program: 'mkfs.ext4', hint: 'install it with: sudo apt-get install e2fsprogs' },
  { program: 'qemu-img', hint: 'install it with: sudo apt-get install qemu-utils (or: brew install qemu)' },
  { program: 'npm', hint: 'install Node.js and npm' },
  { program: 'tar', hint: 'install tar' },
];

export interface ImageBuilderDeps {
  runner?: CommandRunner;
  which?: (program: string) => Promise<string | undefined>;
  now?: () => Date;
}

export class ImageBuildError extends FactoryError {
  constructor(
    public readonly step: string,
    reason: string,
    tail: string[] = [],
  ) {
    const shown = tail.slice(-15).join('\n');
    super('ImageBuildFailed', `image build failed at step "${step}": ${reason}${shown ? `\n--- last output ---\n${shown}` : ''}`, tail.join('\n'));
  }
}

export class ImageBuilder {
  private readonly runner: CommandRunner;
  private readonly which: (program: string) => Promise<string | undefined>;
  private readonly now: () => Date;

  constructor(deps: ImageBuilderDeps = {}) {
    this.runner = deps.runner ?? runCommand;
    this.which = deps.which ?? ((p) => findOnPath(p));
    this.now = deps.now ?? (() => new Date());
  }

  async build(loaded: LoadedRecipe, outDir: string, onProgress: (p: BuildProgress) => void = () => {}): Promise<ImageManifest> {
    const { recipe } = loaded;
    const started = Date.now();
    const report = (id: string, progress?: number) => {
      const def = BUILD_STEPS.find((s) => s.id === id)!;
      onProgress({ step: def.label, progress: progress ?? def.start });
    };
    const stepLabel = (id: string) => BUILD_STEPS.find((s) => s.id === id)!.label;
    await mkdir(outDir, { recursive: true });
    const work = path.join(outDir, '.work');
    await mkdir(work, { recursive: true });

    report('check-tools');
    for (const tool of REQUIRED_TOOLS) {
      if (!(await this.which(tool.program))) {
        throw new ImageBuildError(stepLabel('check-tools'), `${tool.program} is not installed; ${tool.hint}`);
      }
    }
    if (process.platform !== 'linux') {
      throw new ImageBuildError(stepLabel('check-tools'), 'building the base image needs Linux (mmdebstrap)');
    }

    report('agent-clis');
    const clisDir = path.join(work, 'clis');
    const cliEntries: ImageManifest['agentClis'] = [];
    for (const cli of recipe.agentClis) {
      const dir = path.join(clisDir, cli.name);
      await mkdir(dir, { recursive: true });
      const spec = `${cli.npmPackage}@${cli.version}`;
      const pack = await this.must('agent-clis', 'npm', ['pack', spec, '--json', '--pack-destination', dir], { timeoutMs: 15 * 60_000 });
      let packed: { filename?: string; integrity?: string; version?: string } | undefined;
      try {
        packed = (JSON.parse(pack.stdout) as Array<typeof packed>)[0];
      } catch {
        throw new ImageBuildError(stepLabel('agent-clis'), `npm pack ${spec} printed no JSON`, pack.tail);
      }
      if (!packed?.filename || packed.version !== cli.version) {
        throw new ImageBuildError(stepLabel('agent-clis'), `npm pack ${spec} gave ${JSON.stringify(packed).slice(0, 200)}`, pack.tail);
      }
      const tgz = path.join(dir, path.basename(packed.filename));
      // npm pack checked the tarball against the registry's integrity; each file taken from it is digested for the manifest.
      const take = async (fileInPackage: string, into: string, installAs: string) => {
        const member = `package/${fileInPackage}`;
        await this.must('agent-clis', 'tar', ['-xzf', tgz, '-C', dir, member]);
        await mkdir(into, { recursive: true });
        const file = path.join(into, 'binary');
        await this.must('agent-clis', 'mv', [path.join(dir, member), file]);
        await writeFile(path.join(into, 'install-as'), installAs);
        return { installAs, ...(await fileDigest(file)) };
      };
      const main = await take(cli.binaryInPackage, dir, cli.installAs);
      const companions = [];
      for (const [i, c] of cli.companions.entries()) companions.push(await take(c.fileInPackage, path.join(dir, 'companions', String(i)), c.installAs));
      await rm(tgz, { force: true });
      await rm(path.join(dir, 'package'), { recursive: true, force: true });
      cliEntries.push({
        name: cli.name,
        npmPackage: cli.npmPackage,
        version: cli.version,
        ...(packed.integrity ? { integrity: packed.integrity } : {}),
        installAs: cli.installAs,
        sha256: main.sha256,
        bytes: main.bytes,
        companions,
      });
    }

    report('rootfs');
    let current = 'rootfs';
    const hook = [
      'sh',
      shellQuote(path.join(loaded.dir, 'customize.sh')),
      '"$1"',
      shellQuote(loaded.dir),
      shellQuote(outDir),
      shellQuote(clisDir),
      String(recipe.diskSizeMb),
    ].join(' ');
    const mmArgs = [
      `--variant=${recipe.variant}`,
      `--architectures=${recipe.architecture}`,
      `--include=${recipe.packages.join(',')}`,
      ...recipe.dpkgOptions.map((o) => `--dpkgopt=${o}`),
      `--customize-hook=${hook}`,
      recipe.suite,
      '/dev/null',
    ];
    const mm = await this.runner('mmdebstrap', mmArgs, {
      env: { ...process.env, TMPDIR: work },
      timeoutMs: 30 * 60_000,
      tailLines: 60,
      onLine: (line) => {
        const marker = /^factory-step: (\w+)/.exec(line);
        if (marker && BUILD_STEPS.some((s) => s.id === marker[1])) {
          current = marker[1]!;
          report(current);
          return;
        }
        if (current === 'rootfs') {
          for (const [re, fraction] of MMDEBSTRAP_PHASES) if (re.test(line)) onProgress({ step: stepLabel('rootfs'), progress: fraction });
        }
      },
    });
    if (mm.code !== 0) {
      throw new ImageBuildError(stepLabel(current), failureReason('mmdebstrap', mm), mm.tail);
    }
    const pkgText = await readFile(path.join(outDir, 'packages.tsv'), 'utf8').catch(() => {
      throw new ImageBuildError(stepLabel('packages'), 'the recipe hook wrote no packages.tsv', mm.tail);
    });
    const packages = parsePackageList(pkgText);
    const kernelRelease = (await readFile(path.join(outDir, 'kernel-release'), 'utf8')).trim();

    report('qcow2');
    const raw = path.join(outDir, 'disk.raw');
    const disk = path.join(outDir, 'disk.qcow2');
    await this.must('qcow2', 'qemu-img', ['convert', '-f', 'raw', '-O', 'qcow2', raw, disk], { timeoutMs: 10 * 60_000 });
    await rm(raw, { force: true });
    const info = await this.must('qcow2', 'qemu-img', ['info', '--output=json', disk]);
    const virtualBytes = Number((JSON.parse(info.stdout) as { 'virtual-size'?: number })['virtual-size']);

    report('checksums');
    const kernel = await fileDigest(path.join(outDir, 'vmlinuz'));
    const initrd = await fileDigest(path.join(outDir, 'initrd.img'));
    const diskDigest = await fileDigest(disk);
    await rm(work, { recursive: true, force: true });
    await rm(path.join(outDir, 'packages.tsv'), { force: true });
    await rm(path.join(outDir, 'kernel-release'), { force: true });

    const manifest: ImageManifest = {
      schema: 1,
      version: loaded.version,
      recipe: {
        name: recipe.name,
        revision: recipe.revision,
        suite: recipe.suite,
        variant: recipe.variant,
        architecture: recipe.architecture,
      },
      buildDate: this.now().toISOString(),
      buildSeconds: Math.round((Date.now() - started) / 100) / 10,
      kernelRelease,
      kernelCmdline: recipe.kernelCmdline,
      files: {
        kernel: { name: 'vmlinuz', ...kernel },
        initrd: { name: 'initrd.img', ...initrd },
        disk: { name: 'disk.qcow2', ...diskDigest, format: 'qcow2', virtualBytes },
      },
      packages,
      agentClis: cliEntries,
      guest: { user: 'agent', uid: 1000, home: '/home/agent', work: '/work' },
    };
    ImageManifest.parse(manifest);
    await writeFile(path.join(outDir, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
    onProgress({ step: 'done', progress: 1 });
    return manifest;
  }

  private async must(stepId: string, command: string, args: string[], opts: { timeoutMs?: number } = {}): Promise<RunResult> {
    const label = BUILD_STEPS.find((s) => s.id === stepId)!.label;
    let result: RunResult;
    try {
      result = await this.runner(command, args, { timeoutMs: opts.timeoutMs ?? 5 * 60_000 });
    } catch (err) {
      throw new ImageBuildError(label, `could not run ${command}: ${(err as Error).message}`);
    }
    if (result.code !== 0) throw new ImageBuildError(label, failureReason(command, result), result.tail);
    return result;
  }
}

function failureReason(command: string, r: RunResult): string {
  if (r.timedOut) return `${command} timed out`;
  if (r.signal) return `${command} was killed by ${r.signal}`;
  return `${command} exited with code ${r.code}`;
}


export async function fileDigest(file: string): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash('sha256');
  await new Promise<void>((resolve, reject) => {
    createReadStream(file)
      .on('data', (c) => hash.update(c))
      .on('error', reject)
      .on('end', () => resolve());
  });
  return { sha256: hash.digest('hex'), bytes: (await stat(file)).size };
}
