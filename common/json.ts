// Untrusted text that should be JSON: text that is not reads as undefined, so the
// schema that checks it next reports it as invalid instead of a parse error escaping.
export function jsonOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    // Not JSON: the caller's schema refuses undefined, naming the file.
    return undefined;
  }
}
