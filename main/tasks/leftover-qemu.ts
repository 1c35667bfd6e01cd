// Is this pid a QEMU that this app started for this sandbox? The one place that
// decides it, so crash cleanup never kills a recycled pid, and so a portable
// identification from the VM layer can replace this body alone.
import fsp from 'node:fs/promises';

export async function isSandboxQemu(pid: number, sandboxDir: string): Promise<boolean> {
  // Linux only: elsewhere nothing is identified, so nothing is killed.
  const cmdline = await fsp.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  return cmdline.includes('qemu') && cmdline.includes(sandboxDir);
}
