import { Header } from './components/Header.js';
import { NewTaskForm } from './components/NewTaskForm.js';
import { StageBoard } from './components/StageBoard.js';
import { TaskDetail } from './components/TaskDetail.js';

export function App() {
  return (
    <div className="app">
      <Header />
      <main className="layout">
        <NewTaskForm />
        <StageBoard />
        <TaskDetail />
      </main>
    </div>
  );
}
