import { CredentialsScreen } from './components/CredentialsScreen.js';
import { EnvironmentsScreen } from './components/environment/EnvironmentsScreen.js';
import { Header } from './components/Header.js';
import { NewTaskForm } from './components/NewTaskForm.js';
import { SettingsScreen } from './components/SettingsScreen.js';
import { StageBoard } from './components/StageBoard.js';
import { TaskDetail } from './components/TaskDetail.js';
import { useShortcuts } from './keyboard/useShortcuts.js';
import { useFactory } from './state/context.js';
import './components/environment/environment.css';

export function App() {
  const view = useFactory((s) => s.view);
  useShortcuts();
  return (
    <div className="app">
      <Header />
      {view === 'credentials' || view === 'environments' || view === 'settings' ? (
        <main className="layout single" data-region="screen">
          {view === 'credentials' ? <CredentialsScreen /> : view === 'environments' ? <EnvironmentsScreen /> : <SettingsScreen />}
        </main>
      ) : (
        <main className="layout">
          <div className="side">
            <NewTaskForm />
            <StageBoard />
          </div>
          <TaskDetail />
        </main>
      )}
    </div>
  );
}
