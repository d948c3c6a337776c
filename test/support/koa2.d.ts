// `koa2` is Koa 2 installed under an alias (npm:koa@^2) to test both majors; its API is Koa's.
declare module 'koa2' {
  import Koa from 'koa';
  export default Koa;
}
