// The root tsconfig (common/, workers/, src-main/ outside the shell, bench/) resolves
// 'electron' here, so `import { app } from 'electron'` outside src-main/shell fails the type
// check as well as the dependency rule. The shell has its own tsconfig with the real types.
export {};
