// One lint config for every runtime folder (see ARCHITECTURE.md). Formatting is Prettier's job
// (.prettierrc.json); these rules catch mistakes, not style. The runtime boundaries themselves
// are checked by .dependency-cruiser.cjs and the per-layer tsconfigs.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import vue from 'eslint-plugin-vue';
import globals from 'globals';

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'out/', 'runs/', 'test-artifacts/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  ...vue.configs['flat/essential'],
  {
    files: ['**/*.vue'],
    languageOptions: { parserOptions: { parser: tseslint.parser, extraFileExtensions: ['.vue'] } },
  },
  {
    languageOptions: { globals: { ...globals.node }, ecmaVersion: 2022, sourceType: 'module' },
    rules: {
      // Unused bindings are errors, except the `_name` convention for deliberately ignored ones.
      // JSON read back from run folders and the wire is typed Record<string, any> at its reader;
      // schemas (zod) check what crosses a runtime boundary.
      '@typescript-eslint/no-explicit-any': 'off',
      // a timer read by a closure declared before the timer is set stays `let`
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    files: ['src-renderer/**'],
    languageOptions: { globals: { ...globals.browser } },
  },
);
