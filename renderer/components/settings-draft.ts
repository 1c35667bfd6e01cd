// What a settings form keeps while the user types: the draft, the host's refusal,
// whether it is saving, and whether the last save went through. A refused save
// keeps the draft, so the user fixes what they typed instead of typing it again.
import { useState } from 'react';
import type { ApiInput } from '../../common/contract.js';
import type { ErrorInfo } from '../../common/domain.js';
import { useController } from '../state/context.js';
import { toErrorInfo } from '../state/store.js';

export function useSettingsDraft<D>() {
  const controller = useController();
  const [draft, setDraft] = useState<D>();
  const [error, setError] = useState<ErrorInfo>();
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState(false);
  return {
    draft,
    error,
    busy,
    done,
    setError,
    /** A new draft: what was saved before is no longer what the form shows. */
    edit(next: D) {
      setDraft(next);
      setDone(false);
    },
    /** Back to what the host has. */
    discard() {
      setDraft(undefined);
      setError(undefined);
    },
    /** Before checking a draft: no message from the last attempt stays. */
    begin() {
      setError(undefined);
      setDone(false);
    },
    /** Sends the patch; the draft goes only once the host took it. */
    async save(patch: ApiInput<'settings.set'>) {
      setBusy(true);
      try {
        await controller.saveSettings(patch);
        setDraft(undefined);
        setDone(true);
      } catch (err) {
        setError(toErrorInfo(err));
      } finally {
        setBusy(false);
      }
    },
  };
}
