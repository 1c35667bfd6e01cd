// The values of the sandbox's own credentials never reach the review (which is
// written to disk and sent to the UI): wherever the returned work holds one,
// the patch and the leading bytes show a marker instead. A value cut by a cap
// is masked too, so no prefix of it shows either.

export interface CredentialValue {
  id: string;
  value: string;
}

/** Shortest piece of a value at the cut end of a text that is still masked. */
const MIN_CUT_PREFIX = 4;

const marker = (id: string) => `[value of credential ${JSON.stringify(id)}]`;

/** The text with every credential value replaced; `cut` also masks a value's beginning at the very end. */
export function maskValuesInText(text: string, values: readonly CredentialValue[], cut = false): string {
  let out = text;
  for (const { id, value } of values) {
    if (value.length < MIN_CUT_PREFIX) continue;
    if (out.includes(value)) out = out.split(value).join(marker(id));
    if (cut) {
      for (let n = Math.min(value.length - 1, out.length); n >= MIN_CUT_PREFIX; n--) {
        if (out.endsWith(value.slice(0, n))) {
          out = out.slice(0, out.length - n) + marker(id);
          break;
        }
      }
    }
  }
  return out;
}

/** A value as bytes: UTF-8, and UTF-16 in both byte orders (escaped leading bytes would show those too). */
function valueForms(value: string): Buffer[] {
  const le = Buffer.from(value, 'utf16le');
  return [Buffer.from(value, 'utf8'), le, Buffer.from(le).swap16()];
}

/** Bytes with every credential value (UTF-8, UTF-16LE/BE) overwritten by '*'. */
export function maskValuesInBytes(bytes: Buffer, values: readonly CredentialValue[]): Buffer {
  const out = Buffer.from(bytes);
  for (const { value } of values) {
    if (Buffer.byteLength(value) < MIN_CUT_PREFIX) continue;
    for (const needle of valueForms(value)) {
      for (let at = out.indexOf(needle); at >= 0; at = out.indexOf(needle, at + 1)) out.fill(0x2a, at, at + needle.length);
    }
  }
  return out;
}

/** The longest value, in bytes of any form: how much more to read so that a value across a cut can be masked whole. */
export function longestValue(values: readonly CredentialValue[]): number {
  return values.reduce((n, v) => Math.max(n, Buffer.byteLength(v.value), Buffer.byteLength(v.value, 'utf16le')), 0);
}

/** Every string in a JSON-like value masked (names, targets, messages); the patch with its cut end. */
export function maskValuesDeep<T>(data: T, values: readonly CredentialValue[]): T {
  if (values.length === 0) return data;
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return maskValuesInText(v, values);
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return walk(data) as T;
}
