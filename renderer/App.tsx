import { CredentialsScreen } from './components/CredentialsScreen.js';
import { Header } from './components/Header.js';
import { NewTaskForm } from './components/NewTaskForm.js';
import { StageBoard } from './components/StageBoard.js';
import { TaskDetail } from './components/TaskDetail.js';
import { useFactory } from './state/context.js';

export function App() {
  const view = useFactory((s) => s.view);
  return (
    <div className="app">
      <Header />
      {view === 'credentials' ? (
        <main className="layout single">
          <CredentialsScreen />
        </main>
      ) : (
        <main className="layout">
          <NewTaskForm />
          <StageBoard />
          <TaskDetail />
        </main>
      )}
    </div>
  );
}
