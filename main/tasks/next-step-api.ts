// The API of the next steps after Approve (git/branch-actions.ts): each one only on
// an approved task, in the folder it came from while that is still its repository.
import { type FactoryApi } from '../../common/contract.js';
import { FactoryError } from '../../common/errors.js';
import type { Task } from '../../common/domain.js';
import { checkHostRepo } from './host-repo.js';
import { branchInfo, checkoutBranch, openEditor, pushBranch } from '../git/branch-actions.js';

type NextStepMethods = 'tasks.branchInfo' | 'tasks.checkout' | 'tasks.push' | 'tasks.openEditor';

export function nextStepApi(getTask: (taskId: string) => Task, editorCommand: () => string): Pick<FactoryApi, NextStepMethods> {
  const approved = async (taskId: string): Promise<{ repoPath: string; branch: string }> => {
    const t = getTask(taskId);
    if (t.phase !== 'approved' || t.decision?.kind !== 'approved') {
      throw new FactoryError('NotApproved', `task ${taskId} is ${t.phase}; its branch is in your repository only once approved`);
    }
    await checkHostRepo(t.repoPath);
    return { repoPath: t.repoPath, branch: t.decision.branch ?? t.branch };
  };
  return {
    'tasks.branchInfo': async ({ taskId }) => {
      const { repoPath, branch } = await approved(taskId);
      return branchInfo(repoPath, branch);
    },
    'tasks.checkout': async ({ taskId }) => {
      const { repoPath, branch } = await approved(taskId);
      return checkoutBranch(repoPath, branch);
    },
    'tasks.push': async ({ taskId, remote }) => {
      const { repoPath, branch } = await approved(taskId);
      return pushBranch(repoPath, remote, branch);
    },
    'tasks.openEditor': async ({ taskId }) => {
      const { repoPath } = await approved(taskId);
      return openEditor(editorCommand(), repoPath);
    },
  };
}
