// Disks on a sandbox host, in one storage folder there:
//   images/<manifest sha256>/  the base image (disk, kernel, initrd), uploaded
//                              once per host, each file's sha256 checked on the
//                              host against the manifest before it is used,
//                              read-only; a half upload is never found
//                              (uploaded to a temp folder, renamed into place)
//   sandboxes/<domain>/        one per sandbox: its qcow2 overlay on the base,
//                              fw_cfg key files, serial log, proxy sockets;
//                              removed whole at teardown.
// Every path is built from validated parts and passed as a quoted word.
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { BaseImage } from '../vm/image-store.js';
import { checkHostPath, DOMAIN_NAME } from './domain-xml.js';
import type { SshHost } from './ssh-host.js';

export interface RemoteBase {
  hash: string;
  dir: string;
  disk: string;
  kernel: string;
  initrd: string;
}

/** The image's identity on a host: the sha256 of its manifest.json. */
export function manifestHash(image: Pick<BaseImage, 'dir'>): string {
  return createHash('sha256').update(readFileSync(path.join(image.dir, 'manifest.json'))).digest('hex');
}

/** An image folder is complete once its upload was checked and renamed into place with its marker. */
async function isComplete(host: SshHost, dir: string): Promise<boolean> {
  return (await host.run(['test', '-f', `${dir}/complete`])).code === 0;
}

export class VolumeStore {
  private readonly uploads = new Map<string, Promise<RemoteBase>>();

  constructor(readonly storageDir: string) {
    checkHostPath('storage folder', storageDir);
  }

  sandboxDir(domain: string): string {
    if (!DOMAIN_NAME.test(domain)) throw new Error(`bad domain name ${JSON.stringify(domain)}`);
    return `${this.storageDir}/sandboxes/${domain}`;
  }

  /** The base image on the host, uploaded and verified first when it is not there yet. One upload per host at a time. */
  ensureBase(host: SshHost, image: BaseImage): Promise<RemoteBase> {
    const hash = manifestHash(image);
    const key = `${host.target.name}\0${hash}`;
    let p = this.uploads.get(key);
    if (!p) {
      p = this.doEnsureBase(host, image, hash);
      this.uploads.set(key, p);
      p.catch(() => this.uploads.delete(key));
    }
    return p;
  }

  private async doEnsureBase(host: SshHost, image: BaseImage, hash: string): Promise<RemoteBase> {
    const dir = `${this.storageDir}/images/${hash}`;
    const base: RemoteBase = { hash, dir, disk: `${dir}/disk.qcow2`, kernel: `${dir}/vmlinuz`, initrd: `${dir}/initrd.img` };
    // 0711: libvirt's QEMU user passes through to the files; nobody lists the folders.
    await host.check(['mkdir', '-p', '-m', '0711', this.storageDir, `${this.storageDir}/images`, `${this.storageDir}/sandboxes`]);
    await host.check(['chmod', '0711', this.storageDir, `${this.storageDir}/images`, `${this.storageDir}/sandboxes`]);
    if (await isComplete(host, dir)) return base;

    const tmp = `${this.storageDir}/images/.upload-${hash}-${randomBytes(6).toString('hex')}`;
    await host.check(['mkdir', '-m', '0700', tmp]);
    try {
      const files = image.manifest.files;
      const wanted: Array<[string, string, string]> = [
        [image.disk, files.disk.name, files.disk.sha256],
        [image.kernel, files.kernel.name, files.kernel.sha256],
        [image.initrd, files.initrd.name, files.initrd.sha256],
      ];
      for (const [local, name] of wanted) await host.putFile(local, `${tmp}/${name}`, 0o444);
      const sums = await host.check(['sha256sum', '--', ...wanted.map(([, name]) => `${tmp}/${name}`)], { timeoutMs: 10 * 60_000 });
      for (const [, name, sha] of wanted) {
        const line = sums.split('\n').find((l) => l.endsWith(`/${name}`));
        if (line?.split(/\s+/)[0] !== sha) throw new Error(`the uploaded ${name} on sandbox host ${host.target.name} does not match the image manifest (sha256 ${line?.split(/\s+/)[0] ?? 'missing'}, expected ${sha})`);
      }
      try {
        await host.check(['sh', '-c', 'chmod 0444 "$1"/* && : > "$1"/complete && chmod 0755 "$1" && mv -T "$1" "$2"', 'sh', tmp, dir]);
      } catch (err) {
        // Another app (the user's other machine) put the same image in place first: theirs is as good.
        if (!(await isComplete(host, dir))) throw err;
      }
      return base;
    } finally {
      // After a rename there is nothing left; after a failure the upload's own error is the one to report.
      await host.run(['rm', '-rf', '--', tmp]).catch(() => undefined);
    }
  }

  /** The sandbox's folder and its overlay on the base disk. */
  async createSandbox(host: SshHost, domain: string, base: RemoteBase): Promise<{ dir: string; overlay: string }> {
    const dir = this.sandboxDir(domain);
    const overlay = `${dir}/overlay.qcow2`;
    await host.check(['mkdir', '-m', '0711', dir]);
    await host.check(['qemu-img', 'create', '-q', '-f', 'qcow2', '-F', 'qcow2', '-b', base.disk, overlay]);
    return { dir, overlay };
  }

  async removeSandbox(host: SshHost, domain: string): Promise<void> {
    await host.check(['rm', '-rf', '--', this.sandboxDir(domain)]);
  }

  /** Sandbox folders on the host (domain names). */
  async listSandboxes(host: SshHost): Promise<string[]> {
    const r = await host.run(['ls', '-1', '--', `${this.storageDir}/sandboxes`]);
    return r.code === 0 ? r.stdout.split('\n').filter((n) => DOMAIN_NAME.test(n)) : [];
  }
}
