//! `samebits serve`: an OpenAI-compatible HTTP server (axum on tokio) for one llama-family model,
//! with continuous batching whose bits never depend on the batch, and a generation receipt with
//! every response (docs/serve.md).
//!
//! - [`api`]: request and response bodies, checked field by field.
//! - [`engine`]: the thread that owns the model and schedules sequences at token boundaries.
//! - [`routes`]: the HTTP endpoints and their JSON errors.
//! - [`stop`]: stop strings over streamed text.
//! - [`metrics`]: counters and their Prometheus exposition.
//! - [`memory`]: the process's resident size, and freed heap pages handed back between rounds.
//! - [`receipts`]: recent receipts for `GET /v1/receipts/{id}`.
//!
//! [`Server::start`] loads the model, binds and serves on background threads;
//! [`Server::shutdown`] stops taking connections, lets in-flight requests finish (up to the
//! grace period), then stops the engine.

pub mod api;
pub mod engine;
pub mod memory;
pub mod metrics;
pub mod receipts;
pub mod routes;
pub mod stop;

use engine::{Engine, EngineOptions, ModelInfo};
use metrics::Metrics;
use receipts::ReceiptStore;
use routes::AppState;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::sync::watch;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    Load(String),
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: String,
        source: std::io::Error,
    },
    #[error("cannot start the HTTP runtime: {0}")]
    Runtime(std::io::Error),
}

/// How to serve.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub engine: EngineOptions,
    pub host: String,
    /// 0 picks a free port ([`Server::addr`] tells which).
    pub port: u16,
    /// The name clients send as `model` (default: the model's file or folder name).
    pub model_name: Option<String>,
    /// Requests that may wait for the engine; one more gets 429.
    pub max_queue: usize,
    /// Largest request body; a larger one gets 413.
    pub max_body_bytes: usize,
    /// Receipts kept for `GET /v1/receipts/{id}`, newest first.
    pub receipts_kept: usize,
    /// How long a shutdown waits for in-flight requests before it cuts them off.
    pub shutdown_grace: Duration,
}

/// A running server.
pub struct Server {
    addr: SocketAddr,
    model_id: String,
    info: ModelInfo,
    metrics: Arc<Metrics>,
    trigger: watch::Sender<bool>,
    thread: JoinHandle<()>,
}

impl Server {
    /// Loads the model, binds `host:port` and starts serving on background threads.
    pub fn start(options: ServeOptions) -> Result<Server, ServeError> {
        let metrics = Arc::new(Metrics::default());
        let receipts = Arc::new(ReceiptStore::new(options.receipts_kept));
        let max_queue = options.max_queue.max(1);
        let (queue, jobs) = std::sync::mpsc::sync_channel(max_queue);
        let model_id = options
            .model_name
            .clone()
            .unwrap_or_else(|| engine::model_id(&options.engine.model));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("samebits-http")
            .enable_all()
            .build()
            .map_err(ServeError::Runtime)?;
        let address = format!("{}:{}", options.host, options.port);
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(&address))
            .map_err(|source| ServeError::Bind {
                address: address.clone(),
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| ServeError::Bind {
            address: address.clone(),
            source,
        })?;
        let engine = Engine::start(
            options.engine.clone(),
            jobs,
            metrics.clone(),
            receipts.clone(),
        )
        .map_err(ServeError::Load)?;
        let info = engine.info.clone();
        let state = Arc::new(AppState::new(
            model_id.clone(),
            info.clone(),
            queue,
            max_queue,
            metrics.clone(),
            receipts,
        ));
        let app = routes::router(state.clone(), options.max_body_bytes);
        let (trigger, triggered) = watch::channel(false);
        let grace = options.shutdown_grace;
        let thread = std::thread::Builder::new()
            .name("samebits-serve".into())
            .spawn(move || {
                runtime.block_on(serve_until_shutdown(listener, app, state, triggered, grace));
                // Connections cut off after the grace period die with the runtime; then the
                // queue's last sender is gone and the engine ends once its sequences have.
                runtime.shutdown_timeout(Duration::from_secs(1));
                engine.join();
            })
            .map_err(ServeError::Runtime)?;
        Ok(Server {
            addr,
            model_id,
            info,
            metrics,
            trigger,
            thread,
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The name clients send as `model`.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Stops taking connections, lets in-flight requests finish (or cuts them off after the
    /// grace period) and stops the engine; returns when all is done.
    pub fn shutdown(self) {
        let _ = self.trigger.send(true);
        let _ = self.thread.join();
    }

    /// Serves until SIGINT or SIGTERM, then shuts down.
    pub fn run_until_signal(self) -> std::io::Result<()> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(termination())?;
        eprintln!(
            "shutting down: {} requests queued, in-flight requests finish first",
            self.metrics.queue_depth()
        );
        self.shutdown();
        Ok(())
    }
}

async fn serve_until_shutdown(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    state: Arc<AppState>,
    triggered: watch::Receiver<bool>,
    grace: Duration,
) {
    let mut on_signal = triggered.clone();
    let stopping = async move {
        let _ = on_signal.wait_for(|stop| *stop).await;
        state.shutting_down.store(true, Ordering::Relaxed);
    };
    let server = axum::serve(listener, app).with_graceful_shutdown(stopping);
    let mut after_grace = triggered;
    let cut_off = async move {
        let _ = after_grace.wait_for(|stop| *stop).await;
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        result = server => {
            if let Err(e) = result {
                eprintln!("error: the HTTP server stopped: {e}");
            }
        }
        () = cut_off => eprintln!("shutdown: in-flight requests cut off after {grace:?}"),
    }
}

/// SIGINT (Ctrl-C) or, on Unix, SIGTERM.
async fn termination() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await
    }
}
