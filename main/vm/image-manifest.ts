// manifest.json of a built base image: what is inside (package versions read
// back from the rootfs, agent CLI versions) and checksums of what boots it.
import { z } from 'zod';

const FileEntry = z.object({
  name: z.string().regex(/^[A-Za-z0-9._-]+$/),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  bytes: z.number().int().nonnegative(),
});

export const ImageManifest = z.object({
  schema: z.literal(1),
  version: z.string().min(1),
  recipe: z.object({
    name: z.string(),
    revision: z.number().int(),
    suite: z.string(),
    variant: z.string(),
    architecture: z.string(),
  }),
  buildDate: z.string().datetime(),
  buildSeconds: z.number().nonnegative(),
  kernelRelease: z.string().min(1),
  kernelCmdline: z.string().min(1),
  files: z.object({
    kernel: FileEntry,
    initrd: FileEntry,
    disk: FileEntry.extend({ format: z.literal('qcow2'), virtualBytes: z.number().int().positive() }),
  }),
  packages: z.array(z.object({ name: z.string().min(1), version: z.string().min(1) })).min(1),
  agentClis: z.array(
    z.object({
      name: z.string(),
      npmPackage: z.string(),
      version: z.string(),
      integrity: z.string().optional(),
      installAs: z.string(),
      sha256: z.string().regex(/^[0-9a-f]{64}$/),
      bytes: z.number().int().nonnegative(),
      /** The recipe's companion files, as installed. */
      companions: z
        .array(z.object({ installAs: z.string(), sha256: z.string().regex(/^[0-9a-f]{64}$/), bytes: z.number().int().nonnegative() }))
        .default([]),
    }),
  ),
  guest: z.object({ user: z.string(), uid: z.number().int(), home: z.string(), work: z.string() }),
});
export type ImageManifest = z.infer<typeof ImageManifest>;

/** Parses `dpkg-query -W -f '${Package}\t${Version}\n'` output. */
export function parsePackageList(text: string): Array<{ name: string; version: string }> {
  const out: Array<{ name: string; version: string }> = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const [name, version, ...rest] = line.split('\t');
    if (!name || !version || rest.length) throw new Error(`unexpected package list line: ${JSON.stringify(line.slice(0, 200))}`);
    out.push({ name, version });
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

export function parseManifest(raw: unknown, where = 'manifest.json'): ImageManifest {
  const parsed = ImageManifest.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${where}: ${issue?.path.join('.') || 'manifest'}: ${issue?.message}`);
  }
  return parsed.data;
}
