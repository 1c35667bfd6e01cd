// Focus that follows the user's action: an element named by a FocusTarget takes
// the focus when the controller asked for it (see FactoryController.requestFocus).
import { useEffect, type RefObject } from 'react';
import type { FocusTarget } from './store.js';
import { useController, useFactory } from './context.js';

export function useFocusRequest(target: FocusTarget, taskId: string, ref: RefObject<HTMLElement | null>): void {
  const controller = useController();
  const request = useFactory((s) => s.focusRequest);
  useEffect(() => {
    if (!request || request.target !== target || request.taskId !== taskId || !ref.current) return;
    if (request.reveal) {
      // jsdom has no scrollIntoView.
      ref.current.closest('section')?.scrollIntoView?.({ block: 'start' });
      ref.current.focus({ preventScroll: true });
    } else {
      ref.current.focus();
    }
    controller.focusDone(request.n);
  }, [controller, request, target, taskId, ref]);
}
