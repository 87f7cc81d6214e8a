// The dashboard's entry: one Vue app with one Pinia instance. It runs in Electron's sandboxed
// renderer or in a plain browser (web mode) and must not care which.
import { createApp } from 'vue';
import { createPinia } from 'pinia';
import App from './App.vue';
import { startRouter } from './router';
import './style.css';

startRouter();
createApp(App).use(createPinia()).mount('#app');
